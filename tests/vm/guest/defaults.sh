#!/usr/bin/env bash
# defaults.sh: the tools as a user first runs them (figures, never a pass/fail threshold):
# rxe-verify and perftest each at its own defaults, and rxe-verify's ways of waiting for
# completions side by side with the CPU each spends, on the loaded rdma_rxe (rxe-kvfix),
# in one guest boot. Run by guest/bench.sh (the bench part `defaults`) or alone in a guest:
#
#   defaults.sh short|full [PAIRS]
#
# 1. At defaults, per message size and pair: `rxe-verify run -d DEV -s REGION -m full
#    --msg-size MSG` (no -t: its default tx depth, adaptive waiting, every byte checked)
#    beside Debian's `ib_write_bw` / `ib_read_bw -d DEV -s MSG -n REGION/MSG` and, when
#    perftest 26 is in /opt/perftest, its two tools without and with --data_validation.
#    Only the flags that make them move the same bytes on the same device: -d (the guest
#    has two rxe devices), -s and -n (perftest's default 5000 iterations would move 5000
#    messages), rxe-verify's -s REGION (its default region is 1 GiB). Nothing else: no -t,
#    -u, -o, -F, CPU pinning or -x (perftest picks the IPv4-mapped RoCE v2 GID by itself,
#    as rxe-verify does). perftest's default QP timeout (14, 67 ms) retransmitted at 64
#    MiB messages under TCG (guest/bw.sh): this part moves at most 8 MiB messages and
#    counts the port's retransmissions per run (column retries) instead of changing it.
#    The one deviation: perftest 26 with --data_validation needs a tx depth of 32 and
#    lowers its tx depth to the iterations, so its validated runs make at least 32
#    iterations (8 MiB: 256 MiB a run); rates are per second and compare.
#    Pairs in ABBA order: odd pairs rxe-verify, perftest, perftest 26; even pairs the
#    reverse (perftest 26's verified and unverified runs alternate likewise).
# 2. Waiting modes: `rxe-verify run` as above in each of MODES (the default adaptive
#    wait; --spin 50, 200, 1000; --busy-poll; --no-spin), in rounds whose order is
#    reversed every other round, each run timed for the CPU it spent: user + sys of the
#    rxe-verify process (bash's `times` in a subshell around it: its waited-for
#    children's rusage), which includes the pattern fills and checks every mode pays
#    and the kernel's rxe work done in its system calls.
#   short (make check)  64 KiB, one pair, WRITE only for perftest, 32 MiB; modes default,
#                       --busy-poll, --no-spin, one round (~25 s, an estimate)
#   full (make bench)   64 KiB, 1 MiB, 8 MiB, WRITE and READ, 64 MiB per run, 5 pairs;
#                       every mode, 5 rounds
#
# Each perftest run's server and client are timed the same way (their user + sys: perftest
# spins on its completion queue), so the CPU per GiB of each tool sits side by side.
# Output in $OUT: defaults-pairs.tsv (one row per pair, op and tool), wait-pairs.tsv (one
# row per round, size and mode; bytes: both ops), defaults-summary.txt, raw files df-rv-*.{json,err,rc},
# df-pt-*.{client,server,rc,client.times,server.times} and wt-*.{json,err,rc,times}. MiB/s (2^20 bytes: perftest's
# "MB/sec"; rxe-verify's JSON MBps is 10^6). tests/bench/render reads the two TSVs.
# shellcheck disable=SC2317  # df_pair and wt_round (and what they call) run through each_msg, by name
set -uo pipefail

usage() { echo "Usage: defaults.sh short|full [PAIRS]"; }
# shellcheck source=vmhost/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../../vmhost/guest/lib.sh"
rxe_guest_main vm-bench 1 2 "$@"
FORM=$1
DEV=rxdf0 NETDEV=ddf0
case $FORM in
short) MSGS='64K' OPS='write' REGION=32M PAIRS=${2:-1} MODES='default busy-poll no-spin' ;;
full) MSGS='64K 1M 8M' OPS='write read' REGION=64M PAIRS=${2:-5} MODES='default spin-50 spin-200 spin-1000 busy-poll no-spin' ;;
*)
	usage >&2
	exit 2
	;;
esac
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || {
	echo "defaults.sh: PAIRS must be a positive count, not '$PAIRS'" >&2
	exit 2
}

DF_TSV=$OUT/defaults-pairs.tsv WT_TSV=$OUT/wait-pairs.tsv SUMMARY=$OUT/defaults-summary.txt
PT26=/opt/perftest/bin PEER=0
[[ ! -x $PT26/ib_write_bw || ! -x $PT26/ib_read_bw ]] || PEER=1
now() { date +%s.%N; }
retries() { cat "/sys/class/infiniband/$DEV/ports/1/hw_counters/completer_retry_err" 2>/dev/null || echo 0; }
bytes_of() { numfmt --from=iec "$1"; }
load1() { cut -d' ' -f1 /proc/loadavg; }
# reversed WORD...: the words in reverse order, one line
reversed() {
	local out=() w
	for w in "$@"; do out=("$w" "${out[@]}"); done
	echo "${out[*]}"
}

# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() { rxe_dummy_down "$DEV" "$NETDEV" 2>/dev/null || true; }
rxe_on_exit cleanup

# rv_run BASE MSG [ARGS]: rxe-verify at its defaults over REGION (plus ARGS: a waiting
# mode) -> BASE.{json,err,rc,times}; prints "write_wire write_verified read_wire
# read_verified write_bytes read_bytes wait_mode spin_us user_s sys_s wall_s" (MiB/s;
# spin_us NA for busy-poll), or fails. The subshell's `times` (second line: its waited-for
# children, so timeout and the rxe-verify it waited for) is the run's user and sys CPU.
rv_run() {
	local base=$1 msg=$2 t0 t1 rc
	shift 2
	t0=$(now)
	(
		timeout 1800 "$RV" run -d "$DEV" -s "$REGION" -m full --msg-size "$msg" "$@" --json --no-progress \
			>"$base.json" 2>"$base.err"
		echo "$?" >"$base.rc"
		times >"$base.times"
	)
	t1=$(now)
	rc=$(cat "$base.rc" 2>/dev/null || echo 1)
	((rc == 0)) || return 1
	python3 - "$base.json" "$base.times" "$t0" "$t1" <<'PY' 2>/dev/null
import json, re, sys
j = json.load(open(sys.argv[1]))
r = (j.get("results") or [{}])[0]
if r.get("result") != "pass":
    sys.exit(1)
def secs(t):  # bash times: 1m2.345s
    m = re.fullmatch(r"(\d+)m([\d.]+)s", t)
    return int(m.group(1)) * 60 + float(m.group(2))
user, sys_ = map(secs, open(sys.argv[2]).read().split("\n")[1].split())
w = j.get("completion_wait") or {}
mib = lambda op, k: "%.3f" % (r[op][k] * 1e6 / 1048576)
print(mib("write", "MBps"), mib("write", "verified_MBps"), mib("read", "MBps"), mib("read", "verified_MBps"),
      r["write"]["bytes"], r["read"]["bytes"], w.get("mode", "NA"),
      "NA" if w.get("spin_us") is None else w["spin_us"], "%.3f" % user, "%.3f" % sys_,
      "%.3f" % (float(sys.argv[4]) - float(sys.argv[3])))
PY
}

# pt TOOL MSG ITERS TAG [ARGS]: perftest at its defaults on $DEV, server then client in
# this guest, unpinned -> df-pt-TAG.*; prints its BW average in MiB/s, or fails. Each
# side runs in a subshell whose `times` (its waited-for children: timeout and the
# perftest it waited for) is that process's user and sys CPU: df-pt-TAG.{server,client}.times
pt() {
	local tool=$1 msg=$2 iters=$3 tag=$4 base spid rc=0 src=0 i
	shift 4
	base=$OUT/df-pt-$tag
	(
		timeout 1800 "$tool" -d "$DEV" -s "$(bytes_of "$msg")" -n "$iters" "$@" >"$base.server" 2>&1
		r=$?
		times >"$base.server.times"
		exit "$r"
	) &
	spid=$!
	for ((i = 0; i < 150; i++)); do # perftest listens on TCP 18515 before it allocates
		ss -ltn 2>/dev/null | grep -q ':18515 ' && break
		sleep 0.2
	done
	(
		timeout 1800 "$tool" -d "$DEV" -s "$(bytes_of "$msg")" -n "$iters" "$@" 127.0.0.1 >"$base.client" 2>&1
		r=$?
		times >"$base.client.times"
		exit "$r"
	) || rc=$?
	wait "$spid" || src=$?
	printf 'client=%s server=%s iters=%s\n' "$rc" "$src" "$iters" >"$base.rc"
	((rc == 0 && src == 0)) || return 1
	awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { bw = $4 } END { if (bw > 0) print bw; else exit 1 }' "$base.client"
}
# pt_cpu TAG: "USER SYS" seconds of perftest's server and client together (NA NA
# without both times files)
pt_cpu() {
	local f=$OUT/df-pt-$1
	[[ -f $f.server.times && -f $f.client.times ]] || {
		echo NA NA
		return 0
	}
	# bash times: second line, the children: 1m2.345s 0m0.123s
	awk 'FNR == 2 { for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); t[i] += a[1] * 60 + a[2] } }
		END { printf "%.3f %.3f\n", t[1], t[2] }' "$f.server.times" "$f.client.times"
}
# pt_once: pt, once more when the first run gave no figure (under TCG perftest's rdtsc
# clock has printed 0.00 MiB/s; guest/bw.sh); the retry is recorded (.retried)
pt_once() {
	local out tag=$4 f
	if out=$(pt "$@"); then
		echo "$out"
		return 0
	fi
	for f in "$OUT/df-pt-$tag".*; do mv "$f" "${f/df-pt-$tag./df-pt-$tag.try1.}"; done
	echo "the first run gave no figure (see df-pt-$tag.try1.client)" >"$OUT/df-pt-$tag.retried"
	pt "$@"
}
validated() { sed -n 's/^VALIDATION: PASSED.* - [0-9]* chunks, \([0-9]*\) bytes.*/\1/p' "$OUT/df-pt-$1".{client,server} 2>/dev/null | grep -m1 .; }

# row MSG OP N TOOL MIBPS VERIFIED BYTES RETRIES ORDER LOAD VALIDATED USER_S SYS_S: one
# defaults-pairs.tsv row (USER_S, SYS_S: the CPU of the run that moved it; rxe-verify's
# one run moves both ops, so its figures are the run's, the same on both rows)
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$DF_TSV"; }

# df_pair MSG N: one pair of the defaults comparison; false when a tool gave no figure
df_pair() {
	local msg=$1 n=$2 region iters order step op c0 d v tool mib ok=0 load ww wv rw rvv wb rb us ss
	region=$(bytes_of "$REGION")
	iters=$((region / $(bytes_of "$msg")))
	load=$(load1)
	order="rv pt"
	((PEER == 0)) || order+=" pt26"
	# shellcheck disable=SC2086  # the words of order
	((n % 2)) || order=$(reversed $order)
	for step in $order; do
		case $step in
		rv)
			c0=$(retries)
			if read -r ww wv rw rvv wb rb _ _ us ss _ < <(rv_run "$OUT/df-rv-$msg-$n" "$msg"); then
				d=$(($(retries) - c0))
				[[ $OPS != *write* ]] || row "$msg" write "$n" rxe-verify "$ww" "$wv" "$wb" "$d" "${order// /,}" "$load" NA "$us" "$ss"
				[[ $OPS != *read* ]] || row "$msg" read "$n" rxe-verify "$rw" "$rvv" "$rb" "$d" "${order// /,}" "$load" NA "$us" "$ss"
			else
				ok=1
			fi
			;;
		pt)
			for op in $OPS; do
				c0=$(retries)
				mib=$(pt_once "ib_${op}_bw" "$msg" "$iters" "$op-$msg-$n") || {
					mib=NA
					ok=1
				}
				read -r us ss < <(pt_cpu "$op-$msg-$n")
				row "$msg" "$op" "$n" perftest "$mib" NA "$((iters * $(bytes_of "$msg")))" "$(($(retries) - c0))" "${order// /,}" "$load" NA "$us" "$ss"
			done
			;;
		pt26)
			for v in $( ((n % 2)) && echo "u v" || echo "v u"); do
				local it=$iters dv=() vb=NA
				tool=perftest26
				if [[ $v == v ]]; then
					dv=(--data_validation) tool=perftest26-validated
					((it >= 32)) || it=32
				fi
				for op in $OPS; do
					c0=$(retries)
					mib=$(pt_once "$PT26/ib_${op}_bw" "$msg" "$it" "${v}26-$op-$msg-$n" "${dv[@]}") || {
						mib=NA
						ok=1
					}
					if [[ $v == v && $mib != NA ]]; then vb=$(validated "v26-$op-$msg-$n") || {
						mib=NA
						vb=NA
						ok=1
					}; fi
					read -r us ss < <(pt_cpu "${v}26-$op-$msg-$n")
					row "$msg" "$op" "$n" "$tool" "$mib" NA "$((it * $(bytes_of "$msg")))" "$(($(retries) - c0))" "${order// /,}" "$load" "$vb" "$us" "$ss"
				done
			done
			;;
		esac
	done
	return "$ok"
}

# wait_args MODE: rxe-verify's options for a waiting mode of MODES
wait_args() {
	case $1 in
	default) ;;
	spin-*) echo "--spin ${1#spin-}" ;;
	busy-poll | no-spin) echo "--$1" ;;
	esac
}

# wt_round MSG N: every mode once, in MODES order (odd rounds) or reversed (even)
wt_round() {
	local msg=$1 n=$2 modes=$MODES mode load ok=0 figs ww wv rw rvv wb rb wmode spin user sys wall
	# shellcheck disable=SC2086  # the words of MODES
	((n % 2)) || modes=$(reversed $MODES)
	load=$(load1)
	for mode in $modes; do
		# shellcheck disable=SC2046  # wait_args prints zero to two words
		if figs=$(rv_run "$OUT/wt-$msg-$mode-$n" "$msg" $(wait_args "$mode")); then
			read -r ww wv rw rvv wb rb wmode spin user sys wall <<<"$figs"
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$msg" "$n" "$mode" "$wmode" "$spin" \
				"$ww" "$rw" "$wv" "$rvv" "$((wb + rb))" "$user" "$sys" "$wall" "${modes// /,}" "$load" >>"$WT_TSV"
		else
			ok=1
		fi
	done
	return "$ok"
}

modprobe -a ib_uverbs dummy 2>/dev/null || true
rxe_flavor rxe-kvfix || {
	t_fail "bench defaults: the loaded rdma_rxe is rxe-kvfix" "it is $(rxe_flavor || true)"
	exit 1
}
rxe_dummy_up "$DEV" "$NETDEV" 10.77.8.1/24
printf 'msg_size\top\tpair\ttool\tMiBps\tverified_MiBps\tbytes\tretries\torder\tguest_load1\tvalidated_bytes\tuser_s\tsys_s\n' >"$DF_TSV"
printf 'msg_size\tround\tmode\twait_mode\tspin_us\twrite_MiBps\tread_MiBps\twrite_verified_MiBps\tread_verified_MiBps\tbytes\tuser_s\tsys_s\twall_s\torder\tguest_load1\n' >"$WT_TSV"
if ((PEER)); then
	t_pass "bench defaults: perftest 26 in the guest: its tools at defaults too, without and with --data_validation"
else
	t_skip "bench defaults: perftest 26 at its defaults" "no perftest 26 in the guest ($PT26): the setting perftest_src names no source"
fi
# each_msg KEY FN WHAT TITLE SEE: for each message size MSG, PAIRS calls of FN MSG N
# under one result line (TITLE and SEE with MSG for the size); KEY_seconds in bench-env.txt
each_msg() {
	local key=$1 fn=$2 what=$3 title=$4 see=$5 msg n bad t0=$SECONDS
	for msg in $MSGS; do
		t_start "bench defaults: $msg messages, $title"
		bad=0
		for ((n = 1; n <= PAIRS; n++)); do "$fn" "$msg" "$n" || bad=$((bad + 1)); done
		if ((bad == 0)); then t_pass; else t_fail "$bad of $PAIRS $what lack a figure; see ${see//MSG/$msg}"; fi
	done
	echo "${key}_seconds=$((SECONDS - t0))" >>"$OUT/bench-env.txt"
}
each_msg defaults_pairs df_pair pairs "$PAIRS interleaved pair(s) of rxe-verify and perftest at their defaults ($OPS)" \
	"$OUT/df-rv-MSG-* and df-pt-*-MSG-*"
each_msg wait_modes wt_round rounds "rxe-verify's waiting modes ($MODES), $PAIRS round(s), CPU per run" "$OUT/wt-MSG-*"

python3 - "$DF_TSV" "$WT_TSV" >"$SUMMARY" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("at defaults: rxe-verify (every byte checked) / perftest (nothing checked), same message size and bytes; interleaved pairs")
for m in dict.fromkeys(r["msg_size"] for r in rows):
    for op in ("write", "read"):
        by = {}
        for r in rows:
            if r["msg_size"] == m and r["op"] == op and r["MiBps"] != "NA":
                by.setdefault(r["pair"], {})[r["tool"]] = float(r["MiBps"])
        q = [p["rxe-verify"] / p["perftest"] for p in by.values() if "rxe-verify" in p and "perftest" in p]
        if q:
            print(f"{m:>5} {op:<5} pairs {len(q)}  rxe-verify/perftest median {statistics.median(q):.3f} ({min(q):.3f}-{max(q):.3f})")
wt = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
print("waiting modes: MiB/s WRITE / READ (wire) and CPU s per GiB moved (user + sys), medians")
for m in dict.fromkeys(r["msg_size"] for r in wt):
    for mode in dict.fromkeys(r["mode"] for r in wt):
        g = [r for r in wt if r["msg_size"] == m and r["mode"] == mode]
        if g:
            cpu = statistics.median((float(r["user_s"]) + float(r["sys_s"])) / (int(r["bytes"]) / 2**30) for r in g)
            print(f"{m:>5} {mode:<10} {statistics.median(float(r['write_MiBps']) for r in g):8.2f} "
                  f"{statistics.median(float(r['read_MiBps']) for r in g):8.2f}  CPU {cpu:.3f} s/GiB")
    # perftest at its defaults (it spins on its completion queue, checks nothing): its
    # server's and client's CPU over both ops of a pair, per GiB moved
    per = {}
    for r in rows:
        if r["msg_size"] == m and r["tool"] == "perftest" and r["user_s"] != "NA" and r["MiBps"] != "NA":
            c = per.setdefault(r["pair"], [0.0, 0])
            c[0] += float(r["user_s"]) + float(r["sys_s"])
            c[1] += int(r["bytes"])
    if per:
        print(f"{m:>5} perftest   CPU {statistics.median(c / (b / 2**30) for c, b in per.values()):.3f} s/GiB (server + client, unchecked)")
PY
n_retried=$(find "$OUT" -maxdepth 1 -name 'df-pt-*.retried' | wc -l)
echo "perftest runs repeated because the first gave no figure: $n_retried" >>"$SUMMARY"
cat "$SUMMARY"
exit $((T_FAILS > 0))
