#!/usr/bin/env bash
# nonroot.sh: rxe as an unprivileged user would meet it, on the stock
# module and on rxe-kvfix in one boot. A user (rxeuser) is made at test time and removed
# at the end, with the limits.d drop-in.
#
#   nonroot.sh KERNELRELEASE [ASAN_BINARY]
#
# Per module (stock, then rxe-kvfix):
#   - RLIMIT_MEMLOCK 64 KiB (the seed's default) and 8 MiB (systemd's default), set with
#     prlimit, the user entered with setpriv (no capabilities): ib_write_bw prints
#     "Couldn't allocate MR"; `rxe-verify run -s 1G+16` and `doctor -s 1G+16` exit 3 with
#     one line naming memlock, the current limit, what the whole run pins and the
#     remedies (ulimit -l, limits.d, LimitMEMLOCK=); --json: cause token "memlock"
#   - a limits.d drop-in, then a new login session (runuser -l, through pam_limits) still
#     started from a 64 KiB parent: 1 GiB + 16 B passes on rxe-kvfix, fails with the
#     metadata diagnosis (rxe_metadata_order) on stock
#   - on rxe-kvfix, in that login session on a terminal (tmux): the full span of 256 MiB + 16 B
#     shows its progress bar and ends with the verdict (screens captured)
#   - /dev/infiniband/uverbs0 made 0600: the user's run is device_access, not memlock
# The boot check's unit (rxe-verify-boot.service, as installed in this root) states its
# memlock: LimitMEMLOCK=infinity and no User= (root, which has CAP_IPC_LOCK besides).
# On rxe-kvfix, as root, the fault table's rows on real rxe: rxe-verify under the
# LD_PRELOAD shim /usr/local/lib/rxv-shim.so (guest/shim.sh, tests/vm/shim/).
# With ASAN_BINARY (rxe-verify built with -DRXV_SANITIZE=address,undefined), on
# rxe-kvfix: 1 GiB + 16 B sampled, the full span of 256 MiB + 16 B, and a two-host run (serve and run both the
# sanitizer build, in two namespaces) with no sanitizer report.
set -uo pipefail

usage() { echo "Usage: nonroot.sh KERNELRELEASE [ASAN_BINARY]"; }
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/vm/guest/shim.sh
. "$(dirname "${BASH_SOURCE[0]}")/shim.sh"
rxe_guest_main vm-nonroot 1 2 "$@"
K=$1 ASAN=${2:-}
U=rxeuser
DROPIN=/etc/security/limits.d/90-rxe-kvfix-test.conf
SIZE=1G+16
# the full spans (every byte both ways: the progress display on a terminal, the ASan
# build's full mode) over a smaller region: their code does not depend on the region's
# size, and SIZE's registration, the user's memlock and the kernel's page array are
# checked by the sampled runs above them; a full span of SIZE costs 80-130 s under TCG
FULL_SIZE=256M+16

cleanup() {
	rm -f "$DROPIN"
	chmod 0666 /dev/infiniband/uverbs* 2>/dev/null || true
	userdel -r "$U" >/dev/null 2>&1 || true
}
rxe_on_exit cleanup

[[ $(uname -r) == "$K" ]] || {
	t_fail "$K: booted kernel" "uname -r is $(uname -r)"
	exit 1
}
modprobe -a ib_core ib_uverbs udp_tunnel ip6_udp_tunnel dummy || true

t_start "$K nonroot: user $U made for the test"
id "$U" >/dev/null 2>&1 || useradd -m -s /bin/bash "$U"
if id "$U" >/dev/null 2>&1; then t_pass; else
	t_fail "useradd $U failed"
	exit 1
fi

# as_user LIMIT CMD...: CMD as $U without capabilities, RLIMIT_MEMLOCK soft = hard = LIMIT
as_user() {
	local lim=$1
	shift
	prlimit --memlock="$lim:$lim" setpriv --reuid="$U" --regid="$U" --init-groups --reset-env -- "$@"
}
# login_user CMD: CMD in a new login session of $U (PAM, pam_limits reads limits.d),
# started from a parent at 64 KiB
login_user() { prlimit --memlock=65536:65536 runuser -l "$U" -c "$1"; }

# perftest_mr LIMIT SIZE -> 0 if ib_write_bw (server and client) printed "Couldn't allocate MR"
perftest_mr() {
	local lim=$1 size=$2 gid log=$OUT/nonroot-$PHASE-ib_write_bw-$1 spid
	gid=$(rxe_gid_index rxe0) || return 1
	as_user "$lim" timeout 60 ib_write_bw -d rxe0 -x "$gid" -s "$size" -n 5 >"$log.server" 2>&1 &
	spid=$!
	sleep 2
	as_user "$lim" timeout 60 ib_write_bw -d rxe0 -x "$gid" -s "$size" -n 5 127.0.0.1 >"$log.client" 2>&1
	wait "$spid"
	grep -h "Couldn't allocate MR" "$log.server" "$log.client" | head -n1 | grep -q .
}

# tty_progress: the progress display as a user sees it. In the user's login
# session (the limits.d drop-in in place), a detached tmux of 100x24 runs the full span
# of FULL_SIZE without --json; its screen is captured every 0.5 s while it runs. Every
# distinct screen goes to OUT/nonroot-fixed-tty-screens.txt with its time. Passes when
# screens in the middle show the bar ("LABEL [#####.....]  NN% Ns") at two or more
# points of the run (its label, the pass and op, or its percentage differ: a fast host
# may show each op's bar once, at the same percentage), and the last screen has the
# report's verdict, exit 0 and no bar left.
tty_progress() {
	local scr=$OUT/nonroot-fixed-tty-screens.txt t0=$SECONDS snap last='' bars fin
	t_start "$K nonroot fixed: on a terminal (tmux 100x24, $U's login session) the full span of $FULL_SIZE B shows its progress bar, then the verdict"
	if ! command -v tmux >/dev/null; then
		t_skip "tmux is not installed in this root: the progress display was NOT seen"
		return
	fi
	: >"$scr"
	login_user "tmux -L rxv new-session -d -s rxv -x 100 -y 24 '$RV run -d rxe0 -s $FULL_SIZE -m full; echo rxe-verify exit \$?; sleep 900'"
	while ((SECONDS - t0 < 900)); do
		snap=$(runuser -u "$U" -- tmux -L rxv capture-pane -p -t rxv 2>/dev/null) || break
		if [[ $snap != "$last" ]]; then
			printf -- '--- screen at %d s\n%s\n' "$((SECONDS - t0))" "$snap" >>"$scr"
			last=$snap
		fi
		grep -q '^rxe-verify exit' <<<"$snap" && break
		sleep 0.5
	done
	runuser -u "$U" -- tmux -L rxv kill-server 2>/dev/null || true
	bars=$(grep -oE '^.*\[[#.]{30}\] +[0-9]+%' "$scr" | sed -E 's/ *\[[#.]{30}\] +/ /' | sort -u | wc -l)
	fin=$(printf '%s\n' "$last" | grep -E '^(verdict: |rxe-verify exit )' | tr '\n' ' ')
	echo "     $((SECONDS - t0)) s; $(grep -c '^--- screen' "$scr") distinct screens, the bar at $bars different points; last screen: $fin"
	grep -m2 -E '\[[#.]{30}\] +[0-9]+%' "$scr" | sed 's/^/     mid-run: /'
	if ((bars >= 2)) && [[ $fin == *'verdict: pass '*'rxe-verify exit 0 '* ]] && ! grep -qE '\[[#.]{30}\]' <<<"$last"; then
		t_pass
	else
		t_fail "screens in $scr: the bar at $bars point(s) of the run; last screen: $(printf '%s' "$last" | tr '\n' '|' | head -c 300)"
	fi
}

# memlock_checks LIMIT_BYTES: run and doctor at that limit
memlock_checks() {
	local lim=$1 kib=$(($1 / 1024)) f rc line n
	f=$OUT/nonroot-$PHASE-run-$kib
	t_start "$K nonroot $PHASE: ${kib} KiB: ib_write_bw -s $((lim * 2)) says \"Couldn't allocate MR\""
	if perftest_mr "$lim" "$((lim * 2))"; then t_pass; else t_fail "no such line (see $OUT/nonroot-$PHASE-ib_write_bw-$lim.*)"; fi

	t_start "$K nonroot $PHASE: ${kib} KiB: run -s $SIZE exits 3, one line: memlock, limit, the run's need, remedies"
	rc=0
	as_user "$lim" "$RV" run -d rxe0 -s "$SIZE" >"$f.out" 2>"$f.err" || rc=$?
	n=$(wc -l <"$f.err")
	line=$(head -n1 "$f.err")
	echo "     stderr at ${kib} KiB: $line"
	# 1 GiB + 16 B spans 262,145 pages; with the sampled staging (15 slots of 1 MiB + 64 B,
	# 3841 pages): 1048580 + 15364 = 1063944 KiB
	if [[ $rc == 3 && $n == 1 && $line == *"RLIMIT_MEMLOCK is ${kib} KiB, below the 1063944 KiB this run pins"* &&
		$line == *"ulimit -l"* && $line == *"/etc/security/limits.d/"* && $line == *"LimitMEMLOCK="* ]]; then
		t_pass
	else
		t_fail "exit $rc, $n lines: $(head -c 300 "$f.err")"
	fi
	t_start "$K nonroot $PHASE: ${kib} KiB: run --json names the cause token memlock"
	rc=0
	as_user "$lim" "$RV" run -d rxe0 -s "$SIZE" --json >"$f.json" 2>/dev/null || rc=$?
	if [[ $rc == 3 && $(jget "$f.json" 'j["verdict"] == "not_ready" and j["error"]["cause"] == "memlock"') == true ]]; then
		t_pass
	else
		t_fail "exit $rc: $(head -c 300 "$f.json")"
	fi
	t_start "$K nonroot $PHASE: ${kib} KiB: doctor -s $SIZE exits 3 naming the same need, --json causes [memlock]"
	rc=0
	as_user "$lim" "$RV" doctor -s "$SIZE" >"$f.doctor" 2>&1 || rc=$?
	line=$(grep -m1 '^PROBLEM.*RLIMIT_MEMLOCK' "$f.doctor")
	echo "     doctor at ${kib} KiB: $line"
	as_user "$lim" "$RV" doctor -s "$SIZE" --json >"$f.doctor.json" 2>/dev/null
	if [[ $rc == 3 && $line == *"RLIMIT_MEMLOCK is ${kib} KiB, below the 1063944 KiB"* &&
		$(jget "$f.doctor.json" '"memlock" in j["causes"] and j["memlock"]["sufficient"] is False') == true ]]; then
		t_pass
	else
		t_fail "exit $rc: $(head -c 300 "$f.doctor")"
	fi
}

for PHASE in stock fixed; do
	dmesg -C
	load_phase "$K" "$PHASE" nonroot || continue
	rxe_dummy_up rxe0 d0 10.77.0.1/24 "$BULK_MTU"
	chmod 0666 /dev/infiniband/uverbs*
	echo "     $(ls -l /dev/infiniband/uverbs0)"

	memlock_checks 65536
	memlock_checks 8388608

	t_start "$K nonroot $PHASE: limits.d drop-in, new login session: ulimit -l is unlimited"
	printf '# rxe-kvfix VM test (tests/vm/guest/nonroot.sh)\n%s soft memlock unlimited\n%s hard memlock unlimited\n' "$U" "$U" >"$DROPIN"
	got=$(login_user 'ulimit -l')
	if [[ $got == unlimited ]]; then t_pass; else t_fail "ulimit -l in the login session: '$got'"; fi
	f=$OUT/nonroot-$PHASE-login
	rc=0
	login_user "timeout 900 $RV run -d rxe0 -s $SIZE --json" >"$f.json" 2>"$f.err" || rc=$?
	if [[ $PHASE == fixed ]]; then
		t_start "$K nonroot fixed: the login session passes $SIZE B as $U"
		if [[ $rc == 0 && $(jget "$f.json" 'r["result"] == "pass" and r["verified_bytes"] > 0') == true ]]; then
			t_pass
		else
			t_fail "exit $rc: $(head -c 300 "$f.err") $(jget "$f.json" 'r.get("diagnosis")')"
		fi
		tty_progress
	else
		t_start "$K nonroot stock: the login session fails $SIZE B with the metadata diagnosis, not memlock"
		if [[ $rc == 1 && $(jget "$f.json" '(r.get("diagnosis") or {}).get("cause") == "rxe_metadata_order"') == true ]]; then
			t_pass
		else
			t_fail "exit $rc: $(jget "$f.json" 'r.get("diagnosis")') $(head -c 200 "$f.err")"
		fi
	fi

	t_start "$K nonroot $PHASE: uverbs0 mode 0600: the user's run is device_access, not memlock"
	chmod 0600 /dev/infiniband/uverbs0
	rc=0
	login_user "$RV run -d rxe0 -s 1M --json" >"$f-uverbs.json" 2>"$f-uverbs.err" || rc=$?
	chmod 0666 /dev/infiniband/uverbs0
	echo "     stderr: $(head -n1 "$f-uverbs.err")"
	if [[ $rc == 3 && $(wc -l <"$f-uverbs.err") == 1 && $(jget "$f-uverbs.json" 'j["error"]["cause"] == "device_access"') == true ]]; then
		t_pass
	else
		t_fail "exit $rc: $(head -c 300 "$f-uverbs.err")"
	fi
	rm -f "$DROPIN"

	if [[ $PHASE == fixed && -n $ASAN ]]; then
		for spec in "sampled $SIZE" "full $FULL_SIZE"; do
			read -r mode size <<<"$spec"
			t_start "$K nonroot fixed: ASan+UBSan rxe-verify, $size B $mode: pass, no sanitizer report"
			f=$OUT/asan-$mode
			t0=$SECONDS rc=0
			ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
				timeout 1500 "$ASAN" run -d rxe0 -s "$size" --mode "$mode" --json >"$f.json" 2>"$f.err" || rc=$?
			echo "     $((SECONDS - t0)) s (the plain build: see nonroot-fixed-login for sampled)"
			if [[ $rc == 0 && $(jget "$f.json" 'r["result"] == "pass"') == true ]] &&
				! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f.err"; then
				t_pass
			else
				t_fail "exit $rc: $(grep -m1 -E 'Sanitizer|runtime error' "$f.err" || head -c 200 "$f.err")"
			fi
		done
	fi
	# the fault table's rows on real rxe, through the libibverbs shim (as root)
	[[ $PHASE != fixed ]] || shim_rows "$K"
	rxe_dummy_down rxe0 d0
	unload_phase "$K" "$PHASE" nonroot
done

if [[ -n $ASAN ]]; then
	modprobe rdma_rxe
	rxe_veth_up rxa rxb 1
	t_start "$K nonroot: ASan+UBSan serve in rxb and run --connect in rxa, $SIZE B: pass, no report"
	ip netns exec rxb timeout 900 "$ASAN" serve -d rxe_rxb --timeout 300 >"$OUT/asan-serve.log" 2>&1 &
	spid=$!
	for ((i = 0; i < 120; i++)); do
		ip netns exec rxb ss -Hltn 'sport = :47910' | grep -q . && break
		sleep 0.5
	done
	rc=0 t0=$SECONDS
	ip netns exec rxa timeout 900 "$ASAN" run -d rxe_rxa --connect 10.77.1.2 -s "$SIZE" --json \
		>"$OUT/asan-twohost.json" 2>"$OUT/asan-twohost.err" || rc=$?
	wait "$spid"
	src=$?
	echo "     $((SECONDS - t0)) s; serve exit $src"
	if [[ $rc == 0 && $src == 0 && $(jget "$OUT/asan-twohost.json" 'r["result"] == "pass"') == true ]] &&
		! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$OUT/asan-twohost.err" "$OUT/asan-serve.log"; then
		t_pass
	else
		t_fail "run $rc serve $src: $(grep -h -m1 -E 'Sanitizer|runtime error' "$OUT/asan-twohost.err" "$OUT/asan-serve.log" || head -c 200 "$OUT/asan-twohost.err")"
	fi
	rxe_teardown_all
fi

t_start "$K nonroot: the boot check's unit states its memlock (LimitMEMLOCK=infinity, runs as root)"
unit=$(systemctl cat rxe-verify-boot.service 2>/dev/null || cat /usr/lib/systemd/system/rxe-verify-boot.service /lib/systemd/system/rxe-verify-boot.service 2>/dev/null)
if [[ -z $unit ]]; then
	t_skip "rxe-verify-boot.service is not installed in this root (run through make check: the pkg stage's packages)"
elif grep -qx 'LimitMEMLOCK=infinity' <<<"$unit" && ! grep -q '^User=' <<<"$unit"; then
	t_pass
	echo "     $(grep -x 'LimitMEMLOCK=infinity' <<<"$unit")"
else
	t_fail "the unit has $(grep -E '^(LimitMEMLOCK|User)=' <<<"$unit" | tr '\n' ' ')"
fi
