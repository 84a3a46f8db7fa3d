#!/usr/bin/env bash
# pkg-test.sh: the RPM's %preun on erase, as rpm runs it, on the host (no build root):
# the scriptlet's text from the spec (packaging/rpm/rxe-kvfix.spec.in with META's version,
# expanded by rpmspec -P with %{_prefix} pointing at a copy whose rxe-kvfix is this
# checkout's), run by sh with $1 = 0 in a mount namespace (tmpfs over /run, with
# /run/systemd/system, and over /var/lib and /var/cache, holding a record, a fetched source with its
# .provenance, one put there by hand and a memo) with FAKE systemctl and dkms first on
# PATH that record their calls. systemd lists a pending rxe-kvfix-fetch@ unit:
#   - the unit is stopped, before DKMS unregisters the module (issue 61 item 4: else it
#     later runs dkms autoinstall against a removed tree);
#   - dkms remove --all of the version, the record, the fetched source and the memo gone,
#     the file put there by hand kept; the scriptlet exits 0.
# Needs root, unshare and rpmspec (else a SKIP line saying so).
#
# Cost: about 1 s, measured 2026-12-07.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RXE_PROG=pkg-test
export RXE_PROG
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
t_suite kmod-pkg

t_no_args "Usage: tests/kmod/pkg-test.sh   (host only: root, unshare, rpmspec)" "$@"
# under /tmp: the namespace replaces /var/lib and /var/cache
TMPDIR=/tmp t_workdir pkg

NAME="RPM %preun on erase: a pending rxe-kvfix-fetch@ unit stopped before dkms remove; records and fetched sources gone, hand-put file kept"
if [[ $(id -u) != 0 ]] || ! command -v rpmspec >/dev/null || ! unshare -m true 2>/dev/null; then
	t_skip "$NAME" "needs root, unshare -m and rpmspec (rpm): not tested here"
	exit 0
fi

VER=$(sed -n 's/^Version:[[:space:]]*//p' "$REPO/META")
K=7.1.20-300.fc44.x86_64
UNIT=rxe-kvfix-fetch@$K.service
CALLS=$W/calls
mkdir -p "$W/bin" "$W/usr/lib/rxe-kvfix"
ln -s "$REPO/kmod/rxe-kvfix" "$W/usr/lib/rxe-kvfix/rxe-kvfix"
cat >"$W/bin/systemctl" <<EOF
#!/usr/bin/env bash
# fake systemctl: records; lists one pending fetch unit
echo "systemctl \$*" >>"$CALLS"
[[ \$1 != list-units ]] || echo "$UNIT loaded activating start start rxe-kvfix: fetch the kernel's source and build"
EOF
cat >"$W/bin/dkms" <<EOF
#!/usr/bin/env bash
# fake dkms: records; rxe-kvfix $VER is registered
echo "dkms \$*" >>"$CALLS"
# status: one line a kernel, written over time as dkms does (a reader that stops at the
# first line makes the next write a SIGPIPE)
if [[ \$1 == status ]]; then
	for k in 6.12.113+deb13-amd64 7.2.12+deb14-amd64 7.2.13+deb14-amd64; do
		echo "rxe-kvfix/$VER, \$k, x86_64: installed"
		sleep 0.2
	done
fi
EOF
chmod +x "$W/bin/systemctl" "$W/bin/dkms"

# the scriptlet as rpmbuild would write it into the package
sed -e "s/@VERSION@/$VER/g; s/@RELEASE@/1/g; s/@PACKAGER@/t <t@localhost>/g; s/@DKMS_MINIMUM@/0/g" \
	"$REPO/packaging/rpm/rxe-kvfix.spec.in" >"$W/rxe-kvfix.spec"
rpmspec -P --define "_prefix $W/usr" "$W/rxe-kvfix.spec" 2>"$W/rpmspec.err" |
	sed -n '/^%preun -n rxe-kvfix-dkms$/,/^%/{/^%/d;p}' >"$W/preun.sh"

t_start "$NAME"
out=$(
	# shellcheck disable=SC2016 # expanded by the inner bash
	unshare -m bash -c 'set -e
		mount -t tmpfs none /run && mkdir -p /run/systemd/system
		mount -t tmpfs none /var/lib && mount -t tmpfs none /var/cache
		mkdir -p /var/lib/rxe-kvfix/status /var/cache/rxe-kvfix/sources/.memo
		echo state=deferred >"/var/lib/rxe-kvfix/status/$2"
		cd /var/cache/rxe-kvfix/sources
		touch fetched.tar.xz fetched.tar.xz.provenance byhand.tar.xz .memo/part
		rc=0
		PATH="$1:$PATH" sh "$3" 0 || rc=$?
		echo "exit $rc"
		ls -A /var/lib /var/cache/rxe-kvfix/sources' _ "$W/bin" "$K" "$W/preun.sh" 2>&1
) || true
stop=$(grep -n "^systemctl stop .*$UNIT" "$CALLS" 2>/dev/null | cut -d: -f1 | head -n1 || true)
remove=$(grep -n "^dkms remove -m rxe-kvfix -v $VER --all" "$CALLS" 2>/dev/null | cut -d: -f1 | head -n1 || true)
left=$(sed -n '/^exit /,$p' <<<"$out" | tail -n +2 | tr '\n' ' ')
if [[ -s $W/preun.sh && $out == *"exit 0"* && -n $stop && -n $remove ]] && ((stop < remove)) &&
	[[ $left == *byhand.tar.xz* && $left != *fetched* && $left != *rxe-kvfix\ * && $left != *.memo* ]]; then
	t_pass
else
	t_fail "stop at call ${stop:-never}, dkms remove at ${remove:-never}; calls: $(tr '\n' '|' <"$CALLS" 2>/dev/null); left: $left; out: $(tr '\n' '|' <<<"$out" | cut -c1-300); preun: $(tr '\n' '|' <"$W/preun.sh" | cut -c1-300)"
fi
((${T_FAILS:-0} == 0))
