#!/usr/bin/env bash
# admin-test.sh: the decisions issue 49 moved into one place each, on the host (no
# build root, no kernel build). Run by tests/kmod/run (stage memo) with the rxe part of
# one matrix kernel's source (its Makefile and drivers/infiniband/sw/rxe).
#   - kernel identity (kmod/rxe-kvfix-kernel.sh): upstream version, series and Fedora
#     N-V-R of Debian, Fedora (+debug), rc and two-part releases;
#   - the record (kmod/rxe-kvfix-record.sh): a state it does not know is refused;
#   - rxe-kvfix queue starts rxe-kvfix-fetch@RELEASE.service on the record's state
#     "deferred" alone: a reworded message still starts it, and a failed record whose
#     message names the unit does not (a fake systemctl on PATH records the start; in
#     a mount namespace, /run/systemd/system made to exist; needs root and unshare,
#     else that line skips saying so);
#   - a provider whose copy fails is reported at its cause: prepare --kernel-tree with
#     TMPDIR on a 64 KiB tmpfs (same needs) says "cannot copy ... No space left".
# The status command's rows and --json are tested on a root with real kernels
# (tests/pkg/in-root-kernel-upgrade.sh).
#
# Cost: about 2 s, measured 2026-12-06.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RXE_PROG=admin-test
export RXE_PROG
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
t_suite kmod-admin

t_rxe_tree_args tests/kmod/admin-test.sh "$@"

W=$(mktemp -d /var/tmp/rxe-kvfix-admin.XXXXXX)
cleanup() { rm -rf "$W"; }
trap cleanup EXIT

# --- kernel identity ----------------------------------------------------------
t_start "kernel identity: upstream, series and N-V-R of Debian, Fedora, rc and two-part releases"
out=$(
	# shellcheck source=kmod/rxe-kvfix-lib.sh
	. "$REPO/kmod/rxe-kvfix-lib.sh"
	# shellcheck disable=SC2030,SC2034 # this subshell's own, read by the library
	RXE_KVFIX_OS_RELEASE=$W/none
	for r in 7.2.13+deb14-amd64 7.1.10-200.fc44.x86_64 7.1.10-200.fc44.x86_64+debug 7.3.0-rc7 7.4 6.12.118+deb13-cloud-amd64; do
		rxe_kvfix_kernel "$r"
		printf '%s %s %s %s\n' "$r" "$KERNEL_UPSTREAM" "$KERNEL_SERIES" "$KERNEL_NVR"
	done
	for r in 'latest' '7.2/../x' '7' ''; do
		! rxe_kvfix_is_release "$r" || echo "accepted '$r'"
	done
)
want='7.2.13+deb14-amd64 7.2.13 7.2 7.2.13
7.1.10-200.fc44.x86_64 7.1.10 7.1 7.1.10-200.fc44
7.1.10-200.fc44.x86_64+debug 7.1.10 7.1 7.1.10-200.fc44
7.3.0-rc7 7.3.0 7.3 7.3.0
7.4 7.4.0 7.4 7.4.0
6.12.118+deb13-cloud-amd64 6.12.118 6.12 6.12.118'
if [[ $out == "$want" ]]; then t_pass; else t_fail "got: $(tr '\n' '|' <<<"$out")"; fi

# --- the record -----------------------------------------------------------------
t_start "the record: written with its facts, read back, a state it does not know refused"
out=$(
	# shellcheck source=kmod/rxe-kvfix-lib.sh
	. "$REPO/kmod/rxe-kvfix-lib.sh"
	# shellcheck disable=SC2030,SC2034 # this subshell's own, read by the library
	RXE_KVFIX_STATE_DIR=$W/state1
	rxe_kvfix_record 7.2.13+deb14-amd64 built 'built from tree' class=affected-kzalloc_objs provider=tree
	printf '%s|%s|%s\n' "$(rxe_kvfix_recorded 7.2.13+deb14-amd64 state)" "$(rxe_kvfix_recorded 7.2.13+deb14-amd64 class)" \
		"$(rxe_kvfix_recorded 7.2.13+deb14-amd64 provider)"
	rxe_kvfix_record 7.2.13+deb14-amd64 half-done 'x' 2>&1 || echo refused
)
if [[ $out == "built|affected-kzalloc_objs|tree"*"not one of"*refused ]]; then t_pass; else t_fail "got: $(tr '\n' '|' <<<"$out")"; fi

# --- queue: the state alone -----------------------------------------------------
can_ns=0
if [[ $(id -u) == 0 ]] && command -v unshare >/dev/null && unshare -m true 2>/dev/null; then can_ns=1; fi
mkdir -p "$W/bin"
cat >"$W/bin/systemctl" <<EOF
#!/usr/bin/env bash
echo "systemctl \$*" >>"$W/systemctl.calls"
EOF
cat >"$W/bin/systemd-escape" <<'EOF'
#!/usr/bin/env bash
# --template=T NAME -> T with NAME as its instance (no '/' or '-' in the names used here)
t=${1#--template=}
printf '%s\n' "${t/@./@$2.}"
EOF
chmod +x "$W/bin/systemctl" "$W/bin/systemd-escape"
# queue_in_ns STATE MESSAGE: rxe-kvfix queue K on a record of STATE with MESSAGE, with
# /run/systemd/system present (a mount namespace) and the fake systemctl first on PATH
queue_in_ns() {
	rm -f "$W/systemctl.calls"
	mkdir -p "$W/state2"
	(
		# shellcheck source=kmod/rxe-kvfix-lib.sh
		. "$REPO/kmod/rxe-kvfix-lib.sh"
		RXE_KVFIX_STATE_DIR=$W/state2 rxe_kvfix_record "$K" "$1" "$2"
	)
	# shellcheck disable=SC2016 # expanded by the inner bash
	unshare -m bash -c 'mount -t tmpfs none /run && mkdir -p /run/systemd/system &&
		PATH="$1:$PATH" RXE_KVFIX_STATE_DIR="$2" "$3/kmod/rxe-kvfix" queue "$4"' _ "$W/bin" "$W/state2" "$REPO" "$K" 2>&1
}
t_start "rxe-kvfix queue: a deferred record whose message is reworded still starts rxe-kvfix-fetch@$K.service"
if ((!can_ns)); then
	t_skip "needs root and unshare -m (a mount namespace for /run/systemd/system)"
else
	out=$(queue_in_ns deferred "the kernel's sources arrive later; nothing to do") || true
	if grep -qx "systemctl start --no-block rxe-kvfix-fetch@$K.service" "$W/systemctl.calls" 2>/dev/null &&
		[[ $out == *"built in the background once this transaction is over"* ]]; then
		t_pass
	else
		t_fail "systemctl calls: $(cat "$W/systemctl.calls" 2>/dev/null || echo none); output: $out"
	fi
fi
t_start "rxe-kvfix queue: a failed record whose message names rxe-kvfix-fetch@ starts nothing"
if ((!can_ns)); then
	t_skip "needs root and unshare -m"
else
	out=$(queue_in_ns failed "no source; downloaded by rxe-kvfix-fetch@$K.service later") || true
	if [[ ! -e $W/systemctl.calls && -z $out ]]; then t_pass; else t_fail "systemctl calls: $(cat "$W/systemctl.calls" 2>/dev/null); output: $out"; fi
fi

# --- a provider's copy that fails -------------------------------------------------
t_start "prepare --kernel-tree with no room to copy the rxe directory: the cause in one line, exit 1"
if ((!can_ns)); then
	t_skip "needs root and unshare -m (a full tmpfs as TMPDIR)"
else
	mkdir -p "$W/small"
	rc=0
	# shellcheck disable=SC2016 # expanded by the inner bash
	out=$(unshare -m bash -c 'mount -t tmpfs -o size=64k none "$1" &&
		TMPDIR="$1" RXE_KVFIX_CONF=/nonexistent "$2/kmod/rxe-kvfix-prepare" -q --no-fetch --kernel-tree "$3" --out "$4" "$5"' \
		_ "$W/small" "$REPO" "$TREE" "$W/out" "$K" 2>&1) || rc=$?
	if ((rc == 1)) && [[ $(grep -c . <<<"$out") == 1 && $out == *"error: cannot copy $TREE/drivers/infiniband/sw/rxe"*"No space left on device"* ]]; then
		t_pass
	else
		t_fail "exit $rc: $out"
	fi
fi
((T_FAILS == 0))
