#!/usr/bin/env bash
# lock-test.sh: one build at a time (kmod/rxe-kvfix-lock.sh) and the cache's temporary
# files unique per process, on the host (no build root, no kernel build). Run by
# tests/kmod/run in its objcheck stage (host only, before any build root).
#   - two builds of two kernels started together, each kmod/rxe-kvfix-dkms-build (DKMS's
#     PRE_BUILD) in one build directory as DKMS runs it: the second waits for the first,
#     says so in one line naming the first's kernel, PID and the lock file, and the order
#     of their steps is recorded (start A, end A, start B, end B);
#   - a nested call: rxe-kvfix repair -> dkms autoinstall -> PRE_BUILD, the lock passed
#     down: no wait, no deadlock; and a build of another kernel started meanwhile waits
#     for the whole dkms run (its steps after PRE_BUILD included);
#   - a dkms that no rxe-kvfix command started (DKMS's kernel hook, dh_dkms, the RPM's
#     %post), building two kernels in one run: its PRE_BUILD keeps the lock until that
#     dkms exits, its second kernel does not wait for it, and an rxe-kvfix repair
#     started meanwhile waits for the whole run (DKMS's steps after PRE_BUILD included);
#   - a lock held past RXE_KVFIX_LOCK_TIMEOUT: the build gives up in that time, not
#     built (77), its record naming the holder's kernel and PID and what to run;
#   - two kmod/rxe-kvfix-fetch of the same source at once (--deb, a linux-source .deb made
#     here with 2 MB of random data in its rxe directory, so that the repacking takes
#     about a second): both exit 0, the kept file is whole, no temporary file is left.
# Stand-ins, labelled as such: the builds' prepare (a copy of kmod/ with a stand-in
# rxe-kvfix-prepare that sleeps, as objcheck-test.sh's), the kernel build directory's
# `modules` target, dkms (status and autoinstall) and logger on PATH. The lock, the
# dkms-build, the admin command and the fetch are the real scripts.
#
# Cost: about 18 s (14-22 s measured 2026-12-07 on the shared 2-core host: the stand-ins'
# sleeps, 11 s of them, and the two fetches' xz of 2 MB).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RXE_PROG=lock-test
export RXE_PROG
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
# shellcheck source=tests/kmod/standin-lib.sh
. "$HERE/standin-lib.sh"
t_suite kmod-lock

t_no_args "Usage: tests/kmod/lock-test.sh   (host only: flock, dpkg-deb, xz; root for the repair case)" "$@"
t_workdir lock

missing=()
for c in flock dpkg-deb xz timeout; do command -v "$c" >/dev/null || missing+=("$c"); done
if ((${#missing[@]})); then
	t_skip "the build lock and the fetch's temporary files" "this host lacks ${missing[*]} (apt install util-linux dpkg xz-utils coreutils)"
	exit 0
fi

# --- the copy of kmod/ with the stand-ins -------------------------------------------
ORDER=$W/order
mkdir -p "$W/kmod" "$W/kdir" "$W/bin" "$W/state" "$W/run" "$W/mods"
cp "$REPO/META" "$W/"
cp "$REPO/kmod/rxe-kvfix-dkms-build" "$REPO/kmod/rxe-kvfix" "$REPO"/kmod/*.sh "$W/kmod/"
standin_prepare "$W/kmod/rxe-kvfix-prepare" "lock-test.sh; records its start in the order file and takes 1 s, as a real prepare takes its time" "$(
	cat <<EOF
echo "start \$rel" >>"$ORDER"
rm -rf "\$out"
mkdir -p "\$out"
sleep 1
echo "kernel=\$rel provider=test class=affected-kcalloc source=lock-test stand-in" >"\$out/rxe-kvfix-source.txt"
EOF
)"
chmod +x "$W/kmod/rxe-kvfix-prepare"
# the kernel build directory's modules target: the module made, the end recorded
# shellcheck disable=SC2016  # $(M) and $(KERNELRELEASE) are make's
printf 'modules:\n\ttouch $(M)/rdma_rxe.ko\n\techo "end $(KERNELRELEASE)" >>%s\n' "$ORDER" >"$W/kdir/Makefile"
printf '#!/bin/sh\necho "$*" >>%s\n' "$W/logger.log" >"$W/bin/logger"
# dkms: status -m M -k K says installed once autoinstall ran for K; autoinstall -k K
# records DKMS's own steps around the real PRE_BUILD (its copy of the tree before, MAKE
# and the install after), each taking its time
cat >"$W/bin/dkms" <<EOF
#!/usr/bin/env bash
# stand-in dkms for tests/kmod/lock-test.sh
set -euo pipefail
ks=()
cmd=\$1
shift
while ((\$#)); do
	[[ \$1 != -k ]] || ks+=("\$2")
	shift
done
case \$cmd in
status) [[ ! -f "$W/installed-\${ks[0]}" ]] || echo "rxe-kvfix/1.0.0, \${ks[0]}, x86_64: installed" ;;
autoinstall)
	# each -k in turn, in this one process (as DKMS 3 does with several -k)
	for k in "\${ks[@]}"; do
		echo "dkms-copy \$k" >>"$ORDER"
		sleep 0.5
		rc=0
		(cd "$W/build" && "$W/kmod/rxe-kvfix-dkms-build" "\$k" "$W/kdir") >>"$W/dkms-\$k.log" 2>&1 || rc=\$?
		echo "dkms-make \$k (PRE_BUILD exit \$rc)" >>"$ORDER"
		sleep 0.5
		((rc != 0)) || touch "$W/installed-\$k"
		echo "dkms-done \$k" >>"$ORDER"
	done
	;;
*) exit 3 ;;
esac
EOF
chmod +x "$W/bin/"*
mkdir -p "$W/build"

export PATH="$W/bin:$PATH" RXE_KVFIX_STATE_DIR=$W/state RXE_KVFIX_UNPATCHED=1 \
	RXE_KVFIX_LOCK=$W/run/rxe-kvfix.lock RXE_KVFIX_LOCK_TIMEOUT=60 RXE_KVFIX_MODULES_DIR=$W/mods
unset RXE_KVFIX_LOCK_FD

# wait_for PATTERN FILE: until a line of FILE matches (at most 20 s)
wait_for() {
	local i
	for ((i = 0; i < 200; i++)); do
		! grep -qE "$1" "$2" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}
# the real dkms-build in the shared build directory, as DKMS runs PRE_BUILD (there: in
# that directory; here --dir, so that $! is its PID)
BUILD=("$W/kmod/rxe-kvfix-dkms-build" --dir "$W/build")
oneline() { tr '\n' '|' <"$1"; }

# --- 1. two builds of two kernels at once -------------------------------------------
A=7.1.10-300.fc44.x86_64 B=7.1.11-300.fc44.x86_64
t_start "two dkms-build (PRE_BUILD) of two kernels started together: the second waits, says for whom, the order is start/end $A then $B"
: >"$ORDER"
"${BUILD[@]}" "$A" "$W/kdir" >"$W/a.out" 2>&1 &
apid=$!
wait_for "^start $A$" "$ORDER" || true
"${BUILD[@]}" "$B" "$W/kdir" >"$W/b.out" 2>&1 &
bpid=$!
arc=0 brc=0
wait "$apid" || arc=$?
wait "$bpid" || brc=$?
want="start $A|end $A|start $B|end $B|"
wline="waiting for the build of $A by PID $apid (dkms build, PRE_BUILD) to end (lock $RXE_KVFIX_LOCK; at most 60 s)"
if ((arc != 0 || brc != 0)); then
	t_fail "exit $arc and $brc, expected 0 and 0: $(tail -n1 "$W/b.out")"
elif [[ $(oneline "$ORDER") != "$want" ]]; then
	t_fail "the builds ran side by side: order $(oneline "$ORDER"), expected $want"
elif ! grep -qxF "rxe-kvfix-dkms-build: $wline" "$W/b.out"; then
	t_fail "the second build did not say whom it waited for ('$wline'): $(oneline "$W/b.out")"
elif ! grep -qF "$wline" "$W/logger.log"; then
	t_fail "the wait line did not go to the journal (logger): $(oneline "$W/logger.log" 2>/dev/null)"
else
	t_pass
	printf '     order: %s\n     %s\n' "$(oneline "$ORDER")" "$(grep -F waiting "$W/b.out")"
fi

# --- 2. nested: repair -> dkms autoinstall -> PRE_BUILD ------------------------------
C=7.1.12-300.fc44.x86_64 D=7.1.13-300.fc44.x86_64
t_start "rxe-kvfix repair $C -> dkms autoinstall -> PRE_BUILD: the lock passed down (no wait, no deadlock); a build of $D started meanwhile waits for the whole dkms run"
if [[ $(id -u) != 0 ]]; then
	t_skip "rxe-kvfix repair needs root (its need_root check)"
else
	mkdir -p "$W/mods/$C/build"
	: >"$W/mods/$C/build/Makefile"
	: >"$ORDER"
	t0=$(date +%s)
	"$W/kmod/rxe-kvfix" repair "$C" >"$W/c.out" 2>&1 &
	cpid=$!
	wait_for "^dkms-copy $C$" "$ORDER" || true
	"${BUILD[@]}" "$D" "$W/kdir" >"$W/d.out" 2>&1 &
	dpid=$!
	crc=0 drc=0
	# a deadlock ends at the watchdog (90 s, past the lock's own 60 s bound)
	for ((i = 0; i < 900; i++)); do
		kill -0 "$cpid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$cpid" 2>/dev/null; then
		kill "$cpid" 2>/dev/null || true
		crc=124
	fi
	wait "$cpid" || ((crc == 124)) || crc=$?
	wait "$dpid" || drc=$?
	secs=$(($(date +%s) - t0))
	want="dkms-copy $C|start $C|end $C|dkms-make $C (PRE_BUILD exit 0)|dkms-done $C|start $D|end $D|"
	if ((crc != 0)); then
		t_fail "rxe-kvfix repair exited $crc after ${secs}s (124: killed at the watchdog, a deadlock): $(oneline "$W/c.out") $(tr '\n' '|' <"$W/dkms-$C.log" 2>/dev/null)"
	elif grep -q waiting "$W/dkms-$C.log" "$W/c.out"; then
		t_fail "the nested PRE_BUILD waited for its own caller's lock: $(grep -h waiting "$W/dkms-$C.log" "$W/c.out" | head -n1)"
	elif ((drc != 0)); then
		t_fail "the build of $D exited $drc: $(tail -n1 "$W/d.out")"
	elif [[ $(oneline "$ORDER") != "$want" ]]; then
		t_fail "the build of $D ran inside the dkms run of $C: order $(oneline "$ORDER"), expected $want"
	elif ! grep -qF "waiting for the build of $C by PID $cpid (rxe-kvfix repair) to end (lock $RXE_KVFIX_LOCK;" "$W/d.out"; then
		t_fail "the build of $D did not say it waited for rxe-kvfix repair of $C (PID $cpid): $(oneline "$W/d.out")"
	else
		t_pass
		printf '     order: %s (%s s)\n' "$(oneline "$ORDER")" "$secs"
	fi
fi

# --- 3. a dkms no rxe-kvfix command started ------------------------------------------
E=7.1.14-300.fc44.x86_64 F=7.1.15-300.fc44.x86_64 G=7.1.16-300.fc44.x86_64
t_start "a dkms run of $E and $F not started by rxe-kvfix (DKMS's hook, dh_dkms): PRE_BUILD holds the lock until that dkms exits, its second kernel goes on under it, rxe-kvfix repair $G waits for the whole run"
if [[ $(id -u) != 0 ]]; then
	t_skip "rxe-kvfix repair needs root (its need_root check)"
else
	mkdir -p "$W/mods/$G/build"
	: >"$W/mods/$G/build/Makefile"
	: >"$ORDER"
	dkms autoinstall -k "$E" -k "$F" >"$W/ef.out" 2>&1 &
	efpid=$!
	wait_for "^start $E$" "$ORDER" || true
	"$W/kmod/rxe-kvfix" repair "$G" >"$W/g.out" 2>&1 &
	gpid=$!
	efrc=0 grc=0
	wait "$efpid" || efrc=$?
	wait "$gpid" || grc=$?
	want="dkms-copy $E|start $E|end $E|dkms-make $E (PRE_BUILD exit 0)|dkms-done $E|dkms-copy $F|start $F|end $F|dkms-make $F (PRE_BUILD exit 0)|dkms-done $F|dkms-copy $G|start $G|end $G|dkms-make $G (PRE_BUILD exit 0)|dkms-done $G|"
	if ((efrc != 0 || grc != 0)); then
		t_fail "exit $efrc (dkms) and $grc (repair), expected 0 and 0: $(oneline "$W/g.out")"
	elif grep -q waiting "$W/dkms-$F.log"; then
		t_fail "the second kernel of the same dkms run waited for the lock its own run holds: $(grep -h waiting "$W/dkms-$F.log" | head -n1)"
	elif [[ $(oneline "$ORDER") != "$want" ]]; then
		t_fail "rxe-kvfix repair's dkms ran inside the other dkms run: order $(oneline "$ORDER"), expected $want"
	elif ! grep -qF "waiting for the build of $E by PID " "$W/g.out"; then
		t_fail "rxe-kvfix repair did not say it waited for the build of $E: $(oneline "$W/g.out")"
	else
		t_pass
		printf '     order: %s
     %s
' "$(oneline "$ORDER")" "$(grep -F waiting "$W/g.out")"
	fi
fi

# --- 4. a wait that ends ---------------------------------------------------------------
H=7.1.17-300.fc44.x86_64
t_start "a build that holds the lock past RXE_KVFIX_LOCK_TIMEOUT (2 s): dkms-build of $H gives up, NOT BUILT (77) with the holder named in its record"
sleep 60 &
spid=$!
flock "$RXE_KVFIX_LOCK" -c "printf '%s 7.0.1-test lock-test holder\\n' $spid >'$RXE_KVFIX_LOCK'; while kill -0 $spid 2>/dev/null; do sleep 0.2; done" &
hpid=$!
wait_for "^$spid 7.0.1-test" "$RXE_KVFIX_LOCK" || true
t0=$(date +%s)
hrc=0
RXE_KVFIX_LOCK_TIMEOUT=2 "${BUILD[@]}" "$H" "$W/kdir" >"$W/h.out" 2>&1 || hrc=$?
secs=$(($(date +%s) - t0))
kill "$spid" 2>/dev/null || true
wait "$hpid" 2>/dev/null || true
msg=$(sed -n 's/^message=//p' "$W/state/status/$H" 2>/dev/null)
if ((hrc != 77)); then
	t_fail "exit $hrc after ${secs}s, expected 77 (not built): $(oneline "$W/h.out")"
elif ((secs > 10)); then
	t_fail "it gave up after ${secs}s, not after the 2 s asked"
elif [[ $msg != "not built now: the build of 7.0.1-test by PID $spid held the lock $RXE_KVFIX_LOCK for more than 2 s (RXE_KVFIX_LOCK_TIMEOUT); run rxe-kvfix repair $H once that build is over" ]]; then
	t_fail "the record's message: '$msg'"
elif ! grep -qF "waiting for the build of 7.0.1-test by PID $spid (lock-test holder) to end (lock $RXE_KVFIX_LOCK; at most 2 s)" "$W/h.out"; then
	t_fail "no wait line naming the holder: $(oneline "$W/h.out")"
else
	t_pass
	printf '     %s\n' "$msg"
fi

# --- 5. two fetches of the same source at once ---------------------------------------
t_start "two rxe-kvfix-fetch --deb of the same linux-source .deb at once: both exit 0, the kept file whole, no temporary file left"
K=7.2.13+deb14-amd64 V=7.2.13-1
src=$W/deb/src/linux-source-7.2
mkdir -p "$src/drivers/infiniband/sw/rxe" "$W/deb/pkg/usr/src" "$W/deb/pkg/DEBIAN" "$W/cache" "$W/cache-x"
printf 'VERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = 13\nEXTRAVERSION =\n' >"$src/Makefile"
printf 'static int __alloc_mr_page_info(struct rxe_mr *mr, int num_pages)\n{\n\tmr->page_info = kcalloc(num_pages, sizeof(*mr->page_info), GFP_KERNEL);\n}\n' \
	>"$src/drivers/infiniband/sw/rxe/rxe_mr.c"
head -c 2M /dev/urandom >"$src/drivers/infiniband/sw/rxe/blob.bin"
tar -C "$W/deb/src" -cf - linux-source-7.2 | xz -0 -T1 >"$W/deb/pkg/usr/src/linux-source-7.2.tar.xz"
printf 'Package: linux-source-7.2\nVersion: %s\nArchitecture: all\nMaintainer: lock-test <tests@rxe-kvfix.invalid>\nDescription: lock-test stand-in\n' "$V" \
	>"$W/deb/pkg/DEBIAN/control"
dpkg-deb -Znone --root-owner-group --build "$W/deb/pkg" "$W/linux-source-7.2_${V}_all.deb" >/dev/null
fetch() { "$REPO/kmod/rxe-kvfix-fetch" -q --cache "$W/cache" --deb "$W/linux-source-7.2_${V}_all.deb" "$K" "$V"; }
fetch >"$W/f1.out" 2>&1 &
f1=$!
fetch >"$W/f2.out" 2>&1 &
f2=$!
r1=0 r2=0
wait "$f1" || r1=$?
wait "$f2" || r2=$?
kept=$W/cache/linux-source-7.2_$V.tar.xz
left=$(find "$W/cache" -mindepth 1 ! -name "${kept##*/}" ! -name "${kept##*/}.provenance" -printf '%f ')
if ((r1 != 0 || r2 != 0)); then
	t_fail "exit $r1 and $r2, expected 0 and 0: $(tail -qn1 "$W/f1.out" "$W/f2.out" | tr '\n' '|')"
elif ! tar -xJf "$kept" -C "$W/cache-x" 2>"$W/x.err"; then
	t_fail "the kept $(basename "$kept") is not a whole archive: $(head -n1 "$W/x.err")"
elif ! cmp -s "$src/drivers/infiniband/sw/rxe/blob.bin" "$W/cache-x/linux-source-7.2_$V/drivers/infiniband/sw/rxe/blob.bin"; then
	t_fail "the kept archive's rxe directory is not the .deb's (blob.bin differs or is missing)"
elif [[ $(grep -c -e '^kernel=' -e '^kept=' "$kept.provenance" 2>/dev/null) != 2 ]]; then
	t_fail "the provenance is not whole: $(oneline "$kept.provenance" 2>/dev/null)"
elif [[ -n $left ]]; then
	t_fail "left in the cache: $left"
else
	t_pass
	printf '     kept %s (%s bytes), %s\n' "$(basename "$kept")" "$(stat -c %s "$kept")" "$(find "$W/cache" -mindepth 1 -printf '%f ')"
fi

((T_FAILS == 0))
