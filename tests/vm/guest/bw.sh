#!/usr/bin/env bash
# bw.sh: the bandwidth benchmark (figures, never a pass/fail threshold): rxe-verify's
# pipelined, verified full-mode loops against perftest's ib_write_bw / ib_read_bw, on
# the loaded rdma_rxe (rxe-kvfix: DKMS installed it before boot), in one guest boot.
# Run by guest/bench.sh (the bench scenario, make bench) or alone in a guest:
#
#   bw.sh short|full [PAIRS]
#
# Per message size and pair: one `rxe-verify run -m full --msg-size MSG -t 128` over a
# region of REGION bytes (it moves the region by RDMA WRITE, then by RDMA READ, checking
# every byte), and ib_write_bw + ib_read_bw with the same message size, tx depth and
# bytes (-n REGION/MSG, at least 5). READs: rxe-verify keeps at most its QP's
# max_rd_atomic (16) in flight, so ib_read_bw gets -o 16; and perftest gets rxe-verify's
# QP timeout, -u 19 (2.1 s): with its default 14 (67 ms) ib_write_bw retransmitted at
# 64 MiB messages under TCG (the port's completer_retry_err and duplicate_request counters
# grew), which would compare retransmissions, not data paths. Pairs are interleaved in ABBA
# order (odd pairs rxe-verify first, even pairs perftest first) so that a drift of the
# host's speed hits both tools alike; each pair gives a ratio rxe-verify/perftest.
#   short (CI)  64K and 1M messages, 32 MiB per run, 3 pairs
#   full        64K, 1M, 8M and 64M messages, 64 MiB per run (64M: 320 MiB, perftest's
#               5 iterations), 5 pairs; then the full span: `rxe-verify run -s 1G+16
#               -m full` (every byte both ways, verified) beside ib_write_bw -s 513M,
#               which registers a 1026 MiB MR (perftest 25.01 registers 2 x the size)
# Targets, printed and never enforced: wire >= 1.0x perftest (median of the pair ratios),
# verified full span >= 0.8x perftest's wire.
#
# The peer, the one other tool that checks the data it moves: when perftest 26.x is
# in the guest (/opt/perftest, built from a local source by
# tests/bench/perftest-build; the bench scenario copies it in when the
# setting perftest_src names one), every pair also runs its ib_write_bw / ib_read_bw
# with --data_validation (the receiver checks every byte) and without, the two in
# alternating order (its validation ring: a few chunks of one or more messages per QP,
# up to 24 chunks of one or more messages per QP, by its validation_common.h: up to
# 1.5 GiB at 64 MiB messages; at least 32 iterations, see peer); the pair's order of
# tools is rxe-verify, perftest 25, perftest 26 (odd pairs) or the reverse (even) ->
# peer-pairs.tsv. rxe-verify has no mode that moves
# data unchecked: its cost of verification is its verified rate (fills and checks in
# the wall time) against its RDMA-time rate in the same run.
#
# Output in $OUT (/results): bw-pairs.tsv (one row per pair and operation), bw-span.tsv
# (full form), peer-pairs.tsv (with perftest 26), bw-summary.txt, raw files
# bw-rv-*.json and bw-pt-*.{client,server} (perftest 26: bw-pt-v26-*, bw-pt-u26-*).
# Figures are MiB/s (2^20 bytes, perftest's "MB/sec"); rxe-verify's JSON MBps is 10^6.
set -uo pipefail

usage() { echo "Usage: bw.sh short|full [PAIRS]"; }
# shellcheck source=vmhost/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../../vmhost/guest/lib.sh"
rxe_guest_main vm-bench 1 2 "$@"
FORM=$1
DEPTH=128 RD_ATOMIC=16 QP_TIMEOUT=19 DEV=rxbw0 NETDEV=dbw0
case $FORM in
short) MSGS='64K 1M' REGION=32M PAIRS=${2:-3} SPAN=0 ;;
full) MSGS='64K 1M 8M 64M' REGION=64M PAIRS=${2:-5} SPAN=1 ;;
*)
	usage >&2
	exit 2
	;;
esac
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || {
	echo "bw.sh: PAIRS must be a positive count, not '$PAIRS'" >&2
	exit 2
}

PAIRS_TSV=$OUT/bw-pairs.tsv SPAN_TSV=$OUT/bw-span.tsv SUMMARY=$OUT/bw-summary.txt PEER_TSV=$OUT/peer-pairs.tsv
PT26=/opt/perftest/bin PEER=0
[[ ! -x $PT26/ib_write_bw || ! -x $PT26/ib_read_bw ]] || PEER=1
now() { date +%s.%N; }
# retransmissions seen by the port so far (completer retries; each one resends packets)
retries() { cat "/sys/class/infiniband/$DEV/ports/1/hw_counters/completer_retry_err" 2>/dev/null || echo 0; }
bytes_of() { numfmt --from=iec "$1"; }

# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() { rxe_dummy_down "$DEV" "$NETDEV" 2>/dev/null || true; }
rxe_on_exit cleanup

# rv MSG REGION TAG: rxe-verify full mode -> bw-rv-TAG.json; prints "write_wire
# write_verified read_wire read_verified" in MiB/s, or fails
rv() {
	local msg=$1 region=$2 tag=$3 f rc=0
	f=$OUT/bw-rv-$tag
	timeout 1800 "$RV" run -d "$DEV" -s "$region" -m full --msg-size "$msg" -t "$DEPTH" \
		--json --no-progress >"$f.json" 2>"$f.err" || rc=$?
	echo "$rc" >"$f.rc"
	((rc == 0)) || return 1
	jget "$f.json" '" ".join("%.3f" % (r[o][k] * 1e6 / 1048576) for o in ("write", "read") for k in ("MBps", "verified_MBps")) if r["result"] == "pass" else ""'
}

# pt TOOL MSG ITERS TAG [ARGS]: perftest loopback on $DEV (server then client, both in
# this guest; pinned, as perftest times with rdtsc) -> bw-pt-TAG.*; prints its BW
# average in MiB/s, or fails (a run printing 0 counts as no figure)
pt() {
	local tool=$1 msg=$2 iters=$3 tag=$4 base gid spid rc=0 src=0 i t0 t1
	shift 4
	base=$OUT/bw-pt-$tag
	gid=$(rxe_gid_index "$DEV") || return 1
	timeout 1800 taskset -c 1 "$tool" -d "$DEV" -x "$gid" -s "$(bytes_of "$msg")" -n "$iters" -t "$DEPTH" -u "$QP_TIMEOUT" -F "$@" \
		>"$base.server" 2>&1 &
	spid=$!
	for ((i = 0; i < 150; i++)); do # perftest listens on TCP 18515 before it allocates
		ss -ltn 2>/dev/null | grep -q ':18515 ' && break
		sleep 0.2
	done
	t0=$(now)
	timeout 1800 taskset -c 0 "$tool" -d "$DEV" -x "$gid" -s "$(bytes_of "$msg")" -n "$iters" -t "$DEPTH" -u "$QP_TIMEOUT" -F "$@" \
		127.0.0.1 >"$base.client" 2>&1 || rc=$?
	t1=$(now)
	wait "$spid" || src=$?
	printf 'client=%s server=%s iters=%s wall=%s\n' "$rc" "$src" "$iters" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" >"$base.rc"
	((rc == 0 && src == 0)) || return 1
	awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { bw = $4 } END { if (bw > 0) print bw; else exit 1 }' "$base.client"
}

# pt_once TOOL MSG ITERS TAG [ARGS]: pt, run a second time if the first gave no figure:
# under TCG perftest's rdtsc clock can jump between vCPUs although pinned (one ib_read_bw
# of 64 printed 0.00 MiB/s); the retry is recorded (bw-pt-TAG.retried) and counted in
# the summary
pt_once() {
	local out tag=$4
	if out=$(pt "$@"); then
		echo "$out"
		return 0
	fi
	for f in "$OUT/bw-pt-$tag".*; do mv "$f" "${f/bw-pt-$tag./bw-pt-$tag.try1.}"; done
	echo "the first run gave no figure (see bw-pt-$tag.try1.client)" >"$OUT/bw-pt-$tag.retried"
	echo "$(date +%T) bench bw: perftest $tag gave no figure, run again" >&2
	pt "$@"
}

# validated TAG: the bytes perftest 26 says it checked in run TAG ("VALIDATION: PASSED -
# N chunks, M bytes", printed by the side that receives the data), or fails
validated() { sed -n 's/^VALIDATION: PASSED.* - [0-9]* chunks, \([0-9]*\) bytes.*/\1/p' "$OUT/bw-pt-$1".{client,server} 2>/dev/null | grep -m1 .; }

# peer MSG ITERS N: perftest 26's WRITE and READ with --data_validation and without
# (verified first in odd pairs); sets PV_W PV_R PU_W PU_R (MiB/s, empty: no figure; a
# verified run counts only with its VALIDATION: PASSED line) and PV_WB PV_RB (the bytes
# it checked)
peer() {
	local msg=$1 iters=$2 n=$3 v
	# --data_validation needs tx_depth >= 32 and perftest lowers tx_depth to the
	# iterations: at least 32 of them (8 MiB messages: 256 MiB a run, 64 MiB: 2 GiB;
	# the rates, per second, stay comparable with the pair's other tools)
	((iters >= 32)) || iters=32
	for v in $( ((n % 2)) && echo "v u" || echo "u v"); do
		local dv=()
		[[ $v == u ]] || dv=(--data_validation)
		local w r
		w=$(pt_once "$PT26/ib_write_bw" "$msg" "$iters" "${v}26-write-$msg-$n" "${dv[@]}") || w=""
		r=$(pt_once "$PT26/ib_read_bw" "$msg" "$iters" "${v}26-read-$msg-$n" -o "$RD_ATOMIC" "${dv[@]}") || r=""
		if [[ $v == v ]]; then
			PV_WB=$(validated "v26-write-$msg-$n") || w=""
			PV_RB=$(validated "v26-read-$msg-$n") || r=""
			PV_W=$w PV_R=$r
		else
			PU_W=$w PU_R=$r
		fi
	done
}

# pair MSG N: one rxe-verify run and one ib_write_bw + ib_read_bw (and perftest 26's
# runs, see peer), in ABBA order
pair() {
	local msg=$1 n=$2 region iters rvf="" w="" r="" load step order
	region=$REGION
	iters=$(($(bytes_of "$region") / $(bytes_of "$msg")))
	if ((iters < 5)); then # perftest's minimum; rxe-verify moves the same bytes
		iters=5
		region=$((5 * $(bytes_of "$msg")))
	fi
	load=$(cut -d' ' -f1 /proc/loadavg)
	local c0 c1 rvret=0 ptret=0
	PV_W='' PV_R='' PU_W='' PU_R='' PV_WB='' PV_RB=''
	# the tools' order: odd pairs as written, even pairs reversed
	case $((PEER != 0)),$((n % 2)) in
	0,1) order=rv,pt ;;
	0,0) order=pt,rv ;;
	1,1) order=rv,pt,peer ;;
	*) order=peer,pt,rv ;;
	esac
	for step in ${order//,/ }; do
		c0=$(retries)
		if [[ $step == peer ]]; then
			peer "$msg" "$iters" "$n"
			continue
		elif [[ $step == rv ]]; then
			rvf=$(rv "$msg" "$region" "$msg-$n") || rvf=""
			c1=$(retries) rvret=$((c1 - c0))
		else
			w=$(pt_once ib_write_bw "$msg" "$iters" "write-$msg-$n") || w=""
			r=$(pt_once ib_read_bw "$msg" "$iters" "read-$msg-$n" -o "$RD_ATOMIC") || r=""
			c1=$(retries) ptret=$((c1 - c0))
		fi
	done
	[[ -n $rvf && -n $w && -n $r ]] || return 1
	read -r ww wv rw rv_ <<<"$rvf"
	awk -v m="$msg" -v n="$n" -v ww="$ww" -v wv="$wv" -v rw="$rw" -v rv="$rv_" -v pw="$w" -v pr="$r" \
		-v o="$( ((n % 2)) && echo rv-first || echo pt-first)" -v l="$load" -v a="$rvret" -v b="$ptret" 'BEGIN {
		printf "%s\twrite\t%d\t%.2f\t%.2f\t%.3f\t%.2f\t%s\t%s\t%d\t%d\n", m, n, ww, pw, ww / pw, wv, o, l, a, b
		printf "%s\tread\t%d\t%.2f\t%.2f\t%.3f\t%.2f\t%s\t%s\t%d\t%d\n", m, n, rw, pr, rw / pr, rv, o, l, a, b }' >>"$PAIRS_TSV"
	((PEER)) || return 0
	printf '%s\twrite\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n%s\tread\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$msg" "$n" "$ww" "$wv" "${PV_W:-NA}" "${PU_W:-NA}" "${PV_WB:-NA}" "$order" "$load" \
		"$msg" "$n" "$rw" "$rv_" "${PV_R:-NA}" "${PU_R:-NA}" "${PV_RB:-NA}" "$order" "$load" >>"$PEER_TSV"
	[[ -n $PV_W && -n $PV_R && -n $PU_W && -n $PU_R ]]
}

modprobe -a ib_uverbs dummy 2>/dev/null || true
rxe_flavor rxe-kvfix || {
	t_fail "bench bw: the loaded rdma_rxe is rxe-kvfix" "it is $(rxe_flavor || true)"
	exit 1
}
rxe_dummy_up "$DEV" "$NETDEV" 10.77.9.1/24
printf 'msg_size\top\tpair\trv_MiBps\tpt_MiBps\tratio\trv_verified_MiBps\torder\tguest_load1\trv_retries\tpt_retries\n' >"$PAIRS_TSV"
if ((PEER)); then
	printf 'msg_size\top\tpair\trv_wire_MiBps\trv_verified_MiBps\tpt26_verified_MiBps\tpt26_unverified_MiBps\tpt26_validated_bytes\torder\tguest_load1\n' >"$PEER_TSV"
	"$PT26/ib_write_bw" --version >"$OUT/peer-perftest-version.txt" 2>&1 || true
	t_pass "bench bw: perftest 26 in the guest ($(head -n1 "$OUT/peer-perftest-version.txt")): each pair also runs its --data_validation and unverified WRITE and READ"
else
	t_skip "bench bw: perftest 26 --data_validation beside rxe-verify" "no perftest 26 in the guest ($PT26): the setting perftest_src names no source (make bench PERFTEST_SRC=a clone or mirror of linux-rdma/perftest)"
fi
t0=$SECONDS
for msg in $MSGS; do
	t_start "bench bw: $msg messages, $PAIRS interleaved pairs of rxe-verify and ib_write_bw/ib_read_bw (tx depth $DEPTH)"
	ok=0
	for ((n = 1; n <= PAIRS; n++)); do pair "$msg" "$n" && ok=$((ok + 1)); done
	if ((ok == PAIRS)); then t_pass; else t_fail "$((PAIRS - ok)) of $PAIRS pairs gave no figure; see $OUT/bw-rv-$msg-* and bw-pt-*-$msg-*"; fi
done
if ((SPAN)); then
	printf 'what\top\tMiBps\n' >"$SPAN_TSV"
	t_start "bench bw: full span, rxe-verify 1 GiB + 16 B full mode beside ib_write_bw -s 513M (a 1026 MiB MR)"
	if rvf=$(rv 64M 1G+16 span) && w=$(pt ib_write_bw 513M 5 write-span); then
		read -r ww wv rw rv_ <<<"$rvf"
		printf 'rxe-verify wire\twrite\t%s\nrxe-verify verified\twrite\t%s\nrxe-verify wire\tread\t%s\nrxe-verify verified\tread\t%s\nperftest wire\twrite\t%s\n' \
			"$ww" "$wv" "$rw" "$rv_" "$w" >>"$SPAN_TSV"
		t_pass
	else
		t_fail "no figure; see $OUT/bw-rv-span.* and bw-pt-write-span.*"
	fi
fi
echo "bw_seconds=$((SECONDS - t0))" >>"$OUT/bench-env.txt"

python3 - "$PAIRS_TSV" "$SPAN_TSV" >"$SUMMARY" <<'PY'
import csv, statistics, sys, os
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("bandwidth: rxe-verify (pipelined, verified) / perftest, same message size, tx depth and bytes; interleaved pairs")
print(f"{'msg':>5} {'op':<5} {'pairs':>5} {'rv MiB/s':>9} {'pt MiB/s':>9} {'ratio median':>12} {'min-max':>13}  target wire >= 1.0x")
for m in dict.fromkeys(r["msg_size"] for r in rows):
    for op in ("write", "read"):
        g = [r for r in rows if r["msg_size"] == m and r["op"] == op]
        if not g:
            continue
        q = [float(r["ratio"]) for r in g]
        med, lo, hi = statistics.median(q), min(q), max(q)
        # the rule of tests/bench/render's targets: the pairs' whole range on one side decides
        verdict = "met" if lo >= 1.0 else "not met" if hi < 1.0 else f"undecided (the pairs' range holds 1.0; median {med:.2f})"
        print(f"{m:>5} {op:<5} {len(g):>5} {statistics.median(float(r['rv_MiBps']) for r in g):>9.2f} "
              f"{statistics.median(float(r['pt_MiBps']) for r in g):>9.2f} {med:>12.3f} {lo:>6.3f}-{hi:<6.3f}  {verdict}")
        print("      pairs: " + " ".join(f"{float(r['ratio']):.3f}" for r in g)
              + f"   (retransmissions, both ops: rxe-verify {sum(int(r['rv_retries']) for r in g)},"
              f" perftest {sum(int(r['pt_retries']) for r in g)})")
if os.path.exists(sys.argv[2]):
    s = {(r["what"], r["op"]): float(r["MiBps"]) for r in csv.DictReader(open(sys.argv[2]), delimiter="\t")}
    pw = s.get(("perftest wire", "write"))
    if pw:
        print(f"full span 1 GiB + 16 B: ib_write_bw over a 1026 MiB MR {pw:.2f} MiB/s (wire)")
        for op in ("write", "read"):
            v, w = s.get(("rxe-verify verified", op)), s.get(("rxe-verify wire", op))
            if v:
                print(f"  rxe-verify {op:<5} wire {w:.2f}, verified {v:.2f} MiB/s: verified/perftest wire {v / pw:.3f}  "
                      f"target >= 0.8x: {'met' if v / pw >= 0.8 else 'not met'}")
PY
n_retried=$(find "$OUT" -maxdepth 1 -name 'bw-pt-*.retried' | wc -l)
echo "perftest runs repeated because the first gave no figure: $n_retried" >>"$SUMMARY"
cat "$SUMMARY"
exit $((T_FAILS > 0))
