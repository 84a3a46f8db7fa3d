#!/usr/bin/env bash
# wait-test.sh: rxe-kvfix repair --after-transaction (what rxe-kvfix-fetch@.service
# runs) waits for every package manager a Fedora host runs, and builds nothing for a
# package erased meanwhile. On the host (no build root, no kernel build); run by
# tests/kmod/run in its objcheck stage.
#   - rpm's transaction lock held (a POSIX write lock on a stand-in .rpm.lock, as
#     librpm holds it for any frontend: PackageKit, dnf5daemon-server, offline
#     updates), no frontend by a name it knows: it waits until the lock is released,
#     then builds;
#   - dnf-automatic running (a stand-in process of that name): it waits for its end;
#   - rxe-kvfix removed from DKMS while it waited (the transaction erased the package):
#     no dkms autoinstall, one line saying so, exit 0.
# Stand-ins, labelled as such: dkms (status and autoinstall, recording each call), the
# lock holder (python3's fcntl.lockf), dnf-automatic (a copy of sleep). The command,
# its wait and its lock are the real scripts. Needs root (repair's need_root check),
# else each line skips saying so.
#
# Cost: about 25 s (each wait polls every 5 s, as the unit does).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RXE_PROG=wait-test
export RXE_PROG
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
t_suite kmod-wait

t_no_args "Usage: tests/kmod/wait-test.sh   (host only: python3, pgrep; root)" "$@"
t_workdir wait

K=7.1.20-300.fc44.x86_64
mkdir -p "$W/bin" "$W/state" "$W/run" "$W/mods/$K/build"
touch "$W/mods/$K/build/Makefile" "$W/rpm.lock"
ORDER=$W/order
# stand-in dkms: status prints the module while $W/registered exists (installed for K
# once autoinstall ran); each call is recorded in the order file
cat >"$W/bin/dkms" <<EOF
#!/usr/bin/env bash
# stand-in dkms for tests/kmod/wait-test.sh
set -euo pipefail
echo "dkms \$1" >>"$ORDER"
case \$1 in
status)
	[[ -e "$W/registered" ]] || exit 0
	if [[ -e "$W/installed" ]]; then echo "rxe-kvfix/1.0.0, $K, x86_64: installed"; else echo "rxe-kvfix/1.0.0: added"; fi
	;;
autoinstall) touch "$W/installed" ;;
*) exit 3 ;;
esac
EOF
cp "$(command -v sleep)" "$W/bin/dnf-automatic"
chmod +x "$W/bin/dkms"
export PATH="$W/bin:$PATH" RXE_KVFIX_STATE_DIR=$W/state RXE_KVFIX_MODULES_DIR=$W/mods \
	RXE_KVFIX_LOCK=$W/run/rxe-kvfix.lock RXE_KVFIX_RPMLOCK=$W/rpm.lock RXE_KVFIX_RELEASE=$K
unset RXE_KVFIX_LOCK_FD
oneline() { tr '\n' '|' <"$1"; }

# run_case READY BUSY_CMD...: BUSY_CMD runs about 4 s in the background (the order file
# gets "released" as it ends); repair --after-transaction starts once the command READY
# says it is busy (at most 20 s: on a loaded host a fixed second was not always enough)
run_case() {
	local rc=0 busy ready=$1 i
	shift
	: >"$ORDER"
	rm -f "$W/installed" "$W/rpm.lock.busy"
	(
		"$@"
		echo released >>"$ORDER"
	) &
	busy=$!
	for ((i = 0; i < 200; i++)); do
		! "$ready" || break
		sleep 0.1
	done
	"$ready" || echo "     warning: the busy command did not start within 20 s"
	timeout 60 "$REPO/kmod/rxe-kvfix" repair --after-transaction >"$W/out" 2>&1 || rc=$?
	wait "$busy" || true
	return "$rc"
}
# before LINE1 LINE2: the order file has LINE1 before LINE2 (both present)
before() {
	local a b
	a=$(grep -m1 -nxF "$1" "$ORDER" | cut -d: -f1)
	b=$(grep -m1 -nxF "$2" "$ORDER" | cut -d: -f1)
	[[ -n $a && -n $b ]] && ((a < b))
}
# hold_rpm_lock [FILE]: a transaction of 4 s (rpm's lock held, then RPMLOCK.busy made)
# that removes FILE at its end; lock_held and automatic_runs: the READY commands
lock_held() { [[ -e $W/rpm.lock.busy ]]; }
automatic_runs() { pgrep -x dnf-automatic >/dev/null; }
hold_rpm_lock() {
	python3 -c 'import fcntl, os, sys, time
f = open(sys.argv[1], "w")
fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[1] + ".busy", "w").close()
time.sleep(4)
if len(sys.argv) > 2:
    os.remove(sys.argv[2])' "$W/rpm.lock" "$@"
}

if [[ $(id -u) != 0 ]]; then
	for n in "rpm's transaction lock" dnf-automatic "erased meanwhile"; do
		t_start "repair --after-transaction: $n"
		t_skip "rxe-kvfix repair needs root (its need_root check)"
	done
	exit 0
fi

touch "$W/registered"
t_start "repair --after-transaction while a process holds rpm's transaction lock (PackageKit, dnf5daemon-server: no name it knows): waits for its release, then builds"
rc=0
run_case lock_held hold_rpm_lock || rc=$?
if ((rc != 0)); then
	t_fail "exit $rc: $(oneline "$W/out")"
elif ! before released 'dkms autoinstall'; then
	t_fail "dkms autoinstall did not run after the transaction lock's release: order $(oneline "$ORDER")"
else
	t_pass
	echo "     order: $(oneline "$ORDER")"
fi

t_start "repair --after-transaction while dnf-automatic runs: waits for its end, then builds"
rc=0
run_case automatic_runs dnf-automatic 4 || rc=$?
if ((rc != 0)); then
	t_fail "exit $rc: $(oneline "$W/out")"
elif ! before released 'dkms autoinstall'; then
	t_fail "dkms autoinstall did not run after dnf-automatic's end: order $(oneline "$ORDER")"
else
	t_pass
	echo "     order: $(oneline "$ORDER")"
fi

t_start "repair --after-transaction when the transaction erased rxe-kvfix meanwhile: no dkms autoinstall, one line, exit 0"
rc=0
run_case lock_held hold_rpm_lock "$W/registered" || rc=$?
if ((rc != 0)); then
	t_fail "exit $rc: $(oneline "$W/out")"
elif grep -qx 'dkms autoinstall' "$ORDER"; then
	t_fail "dkms autoinstall ran for a package erased meanwhile: order $(oneline "$ORDER")"
elif ! grep -q 'rxe-kvfix was removed while this waited' "$W/out"; then
	t_fail "no line saying why nothing was built: $(oneline "$W/out")"
else
	t_pass
	echo "     $(grep -m1 'removed while' "$W/out")"
fi
