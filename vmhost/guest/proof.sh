#!/usr/bin/env bash
# proof.sh: the stock-versus-fixed proof, run inside a guest booted by
# vmhost/vm-run on kernel K, with rxe-kvfix installed by DKMS before boot.
#
#   proof.sh K EXPECT [PHASES [PERFTEST_TOOLS]]
#
# EXPECT is the kernel's classification from vmhost/kernels.tsv. PHASES (comma
# list, default "stock,fixed" for affected kernels):
#   control  (unaffected kernels) DKMS skipped us; the stock module registers
#            2 GiB and 1 GiB+16 B and passes verified WRITE/READ loops
#   stock    the distribution's module: 1 GiB+16 B, 1025 MiB and 2 GiB must fail
#            with ENOMEM, diagnosed as the rxe metadata order, with the page
#            allocator WARNING from __alloc_mr_page_info in dmesg, and
#            ib_write_bw over a 1026 MiB MR must fail; --split 4 (the
#            workaround) passes and probe puts the boundary at <= 1 GiB
#   fixed-quick  our module is loaded and 1 GiB + 16 B passes (upgrade scenario)
#   readme   our module loaded, README's "Verify" as a user types it: rxe-verify
#            doctor (ready), then rxe-verify run -s 1G,2G --offset 16 (text output,
#            its defaults) passes
#   fixed    our module (resolved by modprobe, checked): 1 GiB, 1 GiB+16 B, 1025 MiB, 2 GiB
#            and 4 GiB pass sampled loops, 1 GiB passes the full-span loop,
#            ib_write_bw and ib_read_bw pass over 1026 MiB MRs, probe reaches
#            2 GiB, dmesg clean
#   stock-short, fixed-short  (fedora scenario) the same two sizes on both
#            modules: 1 GiB+16 B and 2 GiB fail with ENOMEM and the page-allocator
#            WARNING on the stock module, pass verified WRITE/READ loops on ours
#   stock=KO, fixed=KO
#            the same checks on a module file instead (patches/validate --boot: the
#            reviewer's tree built unpatched and patched): KO is insmod'ed and must be
#            the loaded rdma_rxe (build ID, load_ko); the results are labelled "unpatched"
#            and "patched"
# DKMS installs our module to /updates/dkms, or to /extra where /etc/os-release
# names Fedora or a relative (ID/ID_LIKE fedora or rhel): "fixed" checks the one
# this guest's DKMS uses.
#
# Results: testlib lines in /results/results.tsv, rxe-verify JSON in
# /results/<phase>-<size>.json for the side-by-side table.
set -uo pipefail

usage() { echo "Usage: proof.sh KERNELRELEASE EXPECT [control|stock,fixed[,readme]|fixed|fixed-quick|stock-short,fixed-short|stock=KO,fixed=KO [\"ib_write_bw ib_read_bw\"]]"; }
# shellcheck source=vmhost/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rxe_guest_main vm-proof 2 "" "$@"
K=$1 EXPECT=$2
PHASES=${3:-}
# perftest over a 1026 MiB MR takes ~2.5 min per tool under TCG: the scenarios
# run both tools on one kernel only; an empty list runs none
PERFTEST_TOOLS=${4-ib_write_bw ib_read_bw}
[[ -n $PHASES ]] || if [[ $EXPECT == affected-* ]]; then PHASES=stock,fixed; else PHASES=control; fi

PT_SIZE=513M # perftest registers 2 x max(size, page) rounded up: 1026 MiB, 262,656 pages
# the time limit of one rxe-verify run: 900 s; under KASAN (GUEST_KASAN, lib.sh) the
# full span of 1 GiB + 16 B took 492 s and more than 900 s in two runs: 2400 s there
RUN_LIMIT=900
((GUEST_KASAN == 0)) || RUN_LIMIT=2400

# rv PHASE SIZE OFFSET MODE [SPLIT]: rxe-verify run on rxe0, JSON to
# OUT/PHASE-SIZE[+OFF][-full][-splitN].json
rv() {
	local phase=$1 size=$2 off=$3 mode=$4 split=${5:-1} f rc=0
	f=$OUT/$phase-$size$([[ $off == 0 ]] || echo "+$off")$([[ $mode == sampled ]] || echo "-$mode")$([[ $split == 1 ]] || echo "-split$split").json
	timeout "$RUN_LIMIT" "$RV" run "${RV_OP_DEADLINE[@]}" -d rxe0 -s "$size" --offset "$off" --mode "$mode" --split "$split" --json >"$f" 2>"$f.err" || rc=$?
	echo "$rc" >"$f.rc"
	printf '%s\n' "$f"
}

# perftest loopback on rxe0: TOOL SIZE -> exit status of the client, log in OUT
# perftest 25.01 fills its buffer byte by byte with rand() once the MR is registered
# and checks no data either way; a payload pattern (--payload_file_path, perftest
# 4.5-0.20 and later) fills it without rand(): the same MR, the same transfers.
# Measured under TCG in one boot, ib_write_bw -s 513M on rxe-kvfix: 114.9 s with
# rand(), 64.3 s (twice) with the pattern.
PT_PAYLOAD=/tmp/rxe-kvfix-perftest-payload.txt
perftest() {
	local tool=$1 size=$2 gid spid rc=0 src=0 log=$OUT/$PHASE-$1-$2
	gid=$(rxe_gid_index rxe0) || return 99
	[[ -s $PT_PAYLOAD ]] || printf '0x5a5aa5a5,0x01234567,0x89abcdef,0xdeadbeef' >"$PT_PAYLOAD"
	timeout 600 "$tool" -d rxe0 -x "$gid" -s "$size" -n 5 -F --payload_file_path="$PT_PAYLOAD" >"$log.server" 2>&1 &
	spid=$!
	sleep 2
	timeout 600 "$tool" -d rxe0 -x "$gid" -s "$size" -n 5 -F --payload_file_path="$PT_PAYLOAD" 127.0.0.1 >"$log.client" 2>&1 || rc=$?
	wait "$spid" || src=$?
	echo "client=$rc server=$src" >"$log.rc"
	((rc == 0 && src == 0)) || return $((rc ? rc : src))
}

[[ $(uname -r) == "$K" ]] || {
	t_fail "$K: booted kernel" "uname -r is $(uname -r)"
	exit 1
}
modprobe -a ib_core ib_uverbs udp_tunnel ip6_udp_tunnel dummy || true

DKMS_DEST=/updates/dkms
# shellcheck disable=SC1091  # the guest's own os-release
if (. /etc/os-release && [[ " ${ID:-} ${ID_LIKE:-} " == *" fedora "* || " ${ID:-} ${ID_LIKE:-} " == *" rhel "* ]]); then
	DKMS_DEST=/extra
fi
# on the Fedora-shaped root (tests/pkg/fedora-shape.sh) and the Ubuntu-shaped one
# (tests/vm/scenarios.d/88-ubuntu) every result says so
SHAPE=$(grep -oE '(Fedora|Ubuntu)-shaped' /etc/os-release 2>/dev/null | head -n1 || true)
if [[ -n $SHAPE ]]; then
	eval "$(declare -f t_start | sed '1s/^t_start/rxe__t_start_plain/')"
	t_start() { rxe__t_start_plain "$SHAPE (simulated) $1"; }
fi

for SPEC in ${PHASES//,/ }; do
	PHASE=${SPEC%%=*} KO='' L=${SPEC%%=*}
	if [[ $SPEC == *=* ]]; then
		KO=${SPEC#*=}
		case $PHASE in
		stock) L=unpatched ;;
		fixed) L=patched ;;
		*)
			t_fail "$K: phase" "only stock and fixed take a module file, not '$SPEC'"
			continue
			;;
		esac
	fi
	dmesg -C
	if [[ -n $KO ]]; then
		t_start "$K $L: $KO is the loaded rdma_rxe"
		if load_ko "$KO"; then
			t_pass
			echo "     $KO, build ID $(rxe_module_build_id)"
		else
			t_fail "cannot load $KO"
			continue
		fi
	else
		case $PHASE in
		control)
			t_start "$K control: DKMS skipped rxe-kvfix, the in-tree module is used"
			path=$(modinfo -n rdma_rxe 2>/dev/null)
			if [[ $path == */kernel/drivers/infiniband/sw/rxe/* ]] &&
				! find "/lib/modules/$K/updates" -name 'rdma_rxe.ko*' 2>/dev/null | grep -q . &&
				! dkms status rxe-kvfix -k "$K" 2>/dev/null | grep -q installed; then
				t_pass
			else
				t_fail "modinfo -n rdma_rxe is '$path'; dkms: $(dkms status rxe-kvfix -k "$K" 2>&1 | head -n1)"
			fi
			modprobe rdma_rxe
			t_check "$K control: loaded module is stock" rxe_flavor stock
			;;
		stock | stock-short)
			t_start "$K $L: the distribution's rdma_rxe loads"
			if load_stock "$K"; then
				t_pass
				echo "     stock module: $(stock_module "$K")"
			else
				t_fail "cannot load the stock module ($(stock_module "$K"))"
				continue
			fi
			;;
		fixed | fixed-quick | fixed-short | readme)
			t_start "$K $L: modprobe rdma_rxe resolves to and loads rxe-kvfix"
			path=$(modinfo -n rdma_rxe 2>/dev/null)
			if [[ $path == "/lib/modules/$K$DKMS_DEST"/rdma_rxe.ko* ]] && modprobe rdma_rxe && rxe_flavor rxe-kvfix; then
				t_pass
				echo "     $path, version $(cat /sys/module/rdma_rxe/version)"
			else
				t_fail "modinfo -n is '$path', /sys/module/rdma_rxe/version is '$(cat /sys/module/rdma_rxe/version 2>&1)'"
				continue
			fi
			;;
		*)
			t_fail "$K: phase" "unknown phase '$PHASE'"
			continue
			;;
		esac
	fi
	rxe_dummy_up rxe0 d0 10.77.0.1/24 "$BULK_MTU"

	case $PHASE in
	control)
		for spec in 2G:0 1G:16; do
			t_start "$K control: stock rxe registers ${spec%:*}+${spec#*:} B and passes verified loops"
			f=$(rv control "${spec%:*}" "${spec#*:}" sampled)
			if [[ $(cat "$f.rc") == 0 && $(jget "$f" 'r["registered"] and r["result"] == "pass"') == true ]]; then
				t_pass
			else
				t_fail "exit $(cat "$f.rc"): $(jget "$f" 'r.get("diagnosis")') $(head -c 300 "$f.err")"
			fi
		done
		;;
	stock | stock-short)
		sizes='1G:16 1025M:0 2G:0 4G:0'
		if [[ $PHASE == stock-short ]]; then
			sizes='1G:16 2G:0'
		else
			f=$(rv stock 1G 0 sampled) # fresh guest: order 10 usually there; recorded, not asserted
		fi
		for spec in $sizes; do
			t_start "$K $L: ${spec%:*}+${spec#*:} B fails with ENOMEM, diagnosed as rxe metadata order"
			f=$(rv stock "${spec%:*}" "${spec#*:}" sampled)
			if [[ $(cat "$f.rc") == 1 && $(jget "$f" 'r["registered"] is False and r["reg_errno"] == 12 and r["metadata_order"] > 10 and (r.get("diagnosis") or {}).get("cause") == "rxe_metadata_order"') == true ]]; then
				t_pass
			elif [[ $(jget "$f" 'r["registered"]') == true ]]; then
				t_fail "the stock module REGISTERED ${spec%:*}+${spec#*:}: the bug is not there any more (update vmhost/kernels.tsv)"
			else
				t_fail "exit $(cat "$f.rc"): $(jget "$f" 'r.get("reg_errno"), r.get("diagnosis")') $(head -c 300 "$f.err")"
			fi
		done
		# the workaround, probe and perftest: only in the full stock phase
		if [[ $PHASE == stock ]]; then
			t_start "$K $L: --split 4 (the workaround: 2 GiB as four 512 MiB MRs, scatter lists across them) passes"
			f=$(rv stock 2G 0 sampled 4)
			if [[ $(cat "$f.rc") == 0 && $(jget "$f" 'r["registered"] and r["mrs"] == 4 and r["result"] == "pass"') == true ]]; then
				t_pass
			else
				t_fail "exit $(cat "$f.rc"): $(jget "$f" 'r.get("diagnosis")') $(head -c 300 "$f.err")"
			fi
			t_start "$K $L: rxe-verify probe puts the boundary at or below 1 GiB (order 10)"
			timeout 900 "$RV" probe -d rxe0 --max 2G --granularity 64M --budget 300 --json >"$OUT/stock-probe.json" 2>"$OUT/stock-probe.err"
			if [[ $(jget "$OUT/stock-probe.json" 'j["probe"]["largest_ok"]["size"] <= 2**30 and j["probe"]["smallest_fail"]["size"] <= 2**30 + 64 * 2**20') == true ]]; then
				t_pass
				echo "     $(jget "$OUT/stock-probe.json" '"largest that registered: %d MiB (order %d), smallest that failed: %d MiB (order %d)" % (j["probe"]["largest_ok"]["size"] >> 20, j["probe"]["largest_ok"]["metadata_order"], j["probe"]["smallest_fail"]["size"] >> 20, j["probe"]["smallest_fail"]["metadata_order"])')"
			else
				t_fail "probe: $(jget "$OUT/stock-probe.json" 'j.get("probe")') $(head -c 200 "$OUT/stock-probe.err")"
			fi
		fi
		t_start "$K $L: dmesg has the page allocator WARNING from __alloc_mr_page_info"
		dmesg >"$OUT/stock-dmesg.txt"
		if grep -q 'WARNING:' "$OUT/stock-dmesg.txt" && grep -q '__alloc_mr_page_info' "$OUT/stock-dmesg.txt"; then
			t_pass
			echo "     $(grep -m1 'WARNING:' "$OUT/stock-dmesg.txt" | sed 's/^\[[^]]*\] //')"
		else
			t_fail "no WARNING with __alloc_mr_page_info in dmesg"
		fi
		if [[ $PHASE == stock ]]; then
			t_start "$K $L: ib_write_bw -s $PT_SIZE (1026 MiB MR) fails to register"
			if perftest ib_write_bw "$PT_SIZE"; then
				t_fail "ib_write_bw passed on the stock module"
			elif grep -qiE "couldn't allocate mr|failed to create mr|cannot allocate" "$OUT/stock-ib_write_bw-$PT_SIZE".{client,server}; then
				t_pass
			else
				t_fail "ib_write_bw failed, but not on the MR: $(tail -n2 "$OUT/stock-ib_write_bw-$PT_SIZE.client" | tr '\n' ' ')"
			fi
		fi
		;;
	fixed | fixed-quick | fixed-short)
		sizes='1G:0 1G:16 1025M:0 2G:0 4G:0'
		[[ $PHASE != fixed-quick ]] || sizes='1G:16'
		[[ $PHASE != fixed-short ]] || sizes='1G:16 2G:0'
		for spec in $sizes; do
			t_start "$K $L: ${spec%:*}+${spec#*:} B registers and passes sampled WRITE/READ loops"
			f=$(rv fixed "${spec%:*}" "${spec#*:}" sampled)
			if [[ $(cat "$f.rc") == 0 && $(jget "$f" 'r["registered"] and r["result"] == "pass" and r["verified_bytes"] > 0') == true ]]; then
				t_pass
			else
				t_fail "exit $(cat "$f.rc"): $(jget "$f" 'r.get("reg_errno"), r.get("diagnosis"), r.get("mismatch")') $(head -c 300 "$f.err")"
			fi
		done
		# the full span, probe and perftest only in the full fixed phase
		if [[ $PHASE == fixed ]]; then
			t_start "$K $L: 1G+16 B passes the full-span WRITE/READ loop (every byte both ways)"
			f=$(rv fixed 1G 16 full)
			if [[ $(cat "$f.rc") == 0 && $(jget "$f" 'r["result"] == "pass" and r["verified_bytes"] >= 2 * r["size"]') == true ]]; then
				t_pass
			else
				t_fail "exit $(cat "$f.rc"): $(jget "$f" 'r.get("diagnosis"), r.get("mismatch")') $(head -c 300 "$f.err")"
			fi
			t_start "$K $L: rxe-verify probe registers everything up to 2 GiB"
			timeout 900 "$RV" probe -d rxe0 --max 2G --granularity 64M --budget 300 --json >"$OUT/fixed-probe.json" 2>"$OUT/fixed-probe.err"
			if [[ $(jget "$OUT/fixed-probe.json" 'j["probe"]["largest_ok"]["size"] == 2 * 2**30 and j["probe"]["smallest_fail"] is None') == true ]]; then
				t_pass
			else
				t_fail "probe: $(jget "$OUT/fixed-probe.json" 'j.get("probe")') $(head -c 200 "$OUT/fixed-probe.err")"
			fi
			for tool in $PERFTEST_TOOLS; do
				t_start "$K $L: $tool -s $PT_SIZE (1026 MiB MR) passes"
				if perftest "$tool" "$PT_SIZE"; then
					t_pass
					grep -E '^ *[0-9]+ +[0-9]+ ' "$OUT/fixed-$tool-$PT_SIZE.client" | tail -n1 | sed 's/^/     /'
				else
					t_fail "$(cat "$OUT/fixed-$tool-$PT_SIZE.rc"): $(tail -n2 "$OUT/fixed-$tool-$PT_SIZE.client" | tr '\n' ' ')"
				fi
			done
		fi
		;;
	readme)
		t_start "$K $L: README's rxe-verify run -s 1G,2G --offset 16 (after rxe-verify doctor: ready), as typed: pass"
		rc=0 drc=0
		"$RV" doctor >"$OUT/readme-doctor.txt" 2>&1 || drc=$?
		timeout "$RUN_LIMIT" "$RV" run -s 1G,2G --offset 16 >"$OUT/readme-run.txt" 2>&1 || rc=$?
		if ((drc == 0 && rc == 0)) && grep -q '^verdict: pass$' "$OUT/readme-run.txt" &&
			[[ $(grep -cE '^(1|2) GiB @\+16 +(WRITE|READ) ' "$OUT/readme-run.txt") == 4 ]]; then
			t_pass
		else
			t_fail "doctor exit $drc ($(grep -m1 '^PROBLEM' "$OUT/readme-doctor.txt")), run exit $rc: $(tail -n 3 "$OUT/readme-run.txt" | tr '\n' ' ')"
		fi
		;;
	esac

	rxe_dummy_down rxe0 d0
	t_start "$K $L: rdma_rxe unloads"
	if rmmod rdma_rxe; then t_pass; else t_fail "rmmod rdma_rxe failed"; fi
	if [[ $PHASE != stock* ]]; then
		t_start "$K $L: dmesg has no WARNING/BUG/Oops/lockdep report"
		dmesg >"$OUT/$PHASE-dmesg.txt"
		bad=$(dmesg_bad)
		if [[ -z $bad ]]; then t_pass; else t_fail "$(head -n2 <<<"$bad" | tr '\n' ' ')"; fi
	fi
done
exit $((T_FAILS > 0))
