#!/usr/bin/env bash
# admin-test.sh: the decisions issue 49 moved into one place each, on the host (no
# build root, no kernel build). Run by tests/kmod/run (stage memo) with the rxe part of
# one matrix kernel's source (its Makefile and drivers/infiniband/sw/rxe).
#   - kernel identity (kmod/rxe-kvfix-kernel.sh): upstream version, series and Fedora
#     N-V-R of Debian, Fedora (+debug), rc and two-part releases; Ubuntu's forms (GA,
#     lowlatency, a +1 signed upload, HWE ~26.04.1, a cloud kernel) with a fake
#     dpkg-query, and prepare taking a tree by series alone where only that is known;
#     a kernel held, half-configured, unpacked or with triggers pending is still
#     Debian's with its version (the fake's state column);
#   - the rxe part of a diff (git-style, and dpkg-source format 1.0's);
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

# --- kernel identity on Ubuntu ---------------------------------------------------
# dpkg's answers come from a fake dpkg-query (a table of installed packages), the
# headers' Makefile from a modules directory of the test's own; the forms are those
# Ubuntu's archive shows (docs/ubuntu-shaped.md, with where each was read)
mkdir -p "$W/ubin" "$W/mods/7.0.0-15-generic/build" "$W/mods/7.0.0-16-lowlatency/build"
printf 'ID=ubuntu\nVERSION_ID="26.04"\n' >"$W/os-ubuntu"
printf 'ID=linuxmint\nID_LIKE="ubuntu debian"\n' >"$W/os-mint"
printf 'ID=debian\n' >"$W/os-debian"
printf 'VERSION = 7\nPATCHLEVEL = 0\nSUBLEVEL = 14\nEXTRAVERSION =\n' >"$W/mods/7.0.0-15-generic/build/Makefile"
printf 'VERSION = 7\nPATCHLEVEL = 0\nSUBLEVEL = 9\nEXTRAVERSION =\n' >"$W/mods/7.0.0-16-lowlatency/build/Makefile"
# the installed packages: name version source
cat >"$W/dpkg.tsv" <<'EOF2'
linux-headers-7.0.0-15-generic 7.0.0-15.15 linux
linux-modules-7.0.0-15-generic 7.0.0-15.15 linux
linux-image-7.0.0-15-generic 7.0.0-15.15 linux-signed
linux-modules-7.0.0-16-lowlatency 7.0.0-16.16 linux-lowlatency
linux-modules-7.0.0-17-generic 7.0.0-17.17 linux
linux-image-7.0.0-17-generic 7.0.0-17.17+1 linux-signed
linux-headers-7.2.0-3-generic 7.2.0-3.3~26.04.1 linux-hwe-7.2
linux-image-7.2.0-3-generic 7.2.0-3.3~26.04.1 linux-signed-hwe-7.2
linux-image-unsigned-7.1.0-1004-azure 7.1.0-1004.4 linux-azure
linux-headers-7.2.13+deb14-amd64 7.2.13-1 linux
EOF2
cat >"$W/ubin/dpkg-query" <<EOF2
#!/usr/bin/env bash
# the fake: -W -f FORMAT PACKAGE...: "STATE NAME VERSION SOURCE" for the table's
# packages (STATE: the table's fourth column, else ii)
shift 3
for p; do awk -v p="\$p" '\$1 == p { print (\$4 == "" ? "ii" : \$4), \$1, \$2, \$3 }' "$W/dpkg.tsv"; done
EOF2
chmod +x "$W/ubin/dpkg-query"
t_start "kernel identity on Ubuntu: GA, lowlatency, a +1 signed upload, HWE ~26.04.1 and a cloud kernel; Debian beside"
out=$(
	# shellcheck source=kmod/rxe-kvfix-lib.sh
	. "$REPO/kmod/rxe-kvfix-lib.sh"
	# shellcheck disable=SC2030,SC2031,SC2034 # this subshell's own, read by the library
	PATH=$W/ubin:$PATH RXE_KVFIX_MODULES_DIR=$W/mods RXE_KVFIX_OS_RELEASE=$W/os-ubuntu
	show() {
		rxe_kvfix_kernel "$1"
		printf '%s: %s %s exact=%s deb=%s src=%s bin=%s tar=%s %s\n' "$1" "$KERNEL_FAMILY" "$KERNEL_UPSTREAM" \
			"$KERNEL_UPSTREAM_EXACT" "$KERNEL_DEBVER" "$KERNEL_SRCPKG" "$KERNEL_SRCBIN" "$KERNEL_SRCTAR" "$KERNEL_PKGVER"
	}
	for r in 7.0.0-15-generic 7.0.0-16-lowlatency 7.0.0-17-generic 7.2.0-3-generic 7.1.0-1004-azure 7.0.0-99-generic; do
		show "$r"
	done
	RXE_KVFIX_OS_RELEASE=$W/os-mint
	show 7.0.0-15-generic
	# shellcheck disable=SC2034 # read by the library
	RXE_KVFIX_OS_RELEASE=$W/os-debian
	show 7.2.13+deb14-amd64
	for r in 7.0.0-15-generic 7.1.0-1004-azure 7.0.0-15-generic-64k; do
		rxe_kvfix_is_release "$r" || echo "refused '$r'"
	done
)
want='7.0.0-15-generic: ubuntu 7.0.14 exact=1 deb=7.0.0-15.15 src=linux bin=linux-source-7.0.0 tar=/usr/src/linux-source-7.0.0/linux-source-7.0.0.tar 7.0.0-15.15
7.0.0-16-lowlatency: ubuntu 7.0.9 exact=1 deb=7.0.0-16.16 src=linux-lowlatency bin=linux-source-7.0.0 tar=/usr/src/linux-source-7.0.0/linux-source-7.0.0.tar 7.0.0-16.16
7.0.0-17-generic: ubuntu 7.0.0 exact=0 deb=7.0.0-17.17 src=linux bin=linux-source-7.0.0 tar=/usr/src/linux-source-7.0.0/linux-source-7.0.0.tar 7.0.0-17.17
7.2.0-3-generic: ubuntu 7.2.0 exact=0 deb=7.2.0-3.3~26.04.1 src=linux-hwe-7.2 bin=linux-source-7.2.0 tar=/usr/src/linux-source-7.2.0/linux-source-7.2.0.tar 7.2.0-3.3~26.04.1
7.1.0-1004-azure: ubuntu 7.1.0 exact=0 deb=7.1.0-1004.4 src=linux-azure bin=linux-source-7.1.0 tar=/usr/src/linux-source-7.1.0/linux-source-7.1.0.tar 7.1.0-1004.4
7.0.0-99-generic: other 7.0.0 exact=1 deb= src= bin=linux-source-7.0 tar=/usr/src/linux-source-7.0.tar 
7.0.0-15-generic: ubuntu 7.0.14 exact=1 deb=7.0.0-15.15 src=linux bin=linux-source-7.0.0 tar=/usr/src/linux-source-7.0.0/linux-source-7.0.0.tar 7.0.0-15.15
7.2.13+deb14-amd64: debian 7.2.13 exact=1 deb=7.2.13-1 src=linux bin=linux-source-7.2 tar=/usr/src/linux-source-7.2.tar 7.2.13-1'
if [[ $out == "$want" ]]; then t_pass; else t_fail "got: $(diff <(echo "$want") <(echo "$out") | tr '\n' '|')"; fi

# a kernel is a kernel in every state dpkg has it in while installed: held (hi, apt-mark
# hold), half-configured (iF: inside its own postinst's hooks), unpacked (iU: the
# headers while the image configures), triggers pending (it); not rc (removed, its
# configuration kept) nor iH (half-installed)
t_start "kernel identity: a held (hi), half-configured (iF), unpacked (iU) or triggers-pending (it) kernel is Debian's with its version; rc and iH are not"
cat >>"$W/dpkg.tsv" <<'EOF2'
linux-headers-7.2.13+deb14-held 7.2.13-1 linux hi
linux-image-7.2.13+deb14-hook 7.2.13-1 linux iF
linux-headers-7.2.13+deb14-unpacked 7.2.13-1 linux iU
linux-image-7.2.13+deb14-trig 7.2.13-1 linux it
linux-image-7.2.13+deb14-gone 7.2.13-1 linux rc
linux-image-7.2.13+deb14-broken 7.2.13-1 linux iH
EOF2
out=$(
	# shellcheck source=kmod/rxe-kvfix-lib.sh
	. "$REPO/kmod/rxe-kvfix-lib.sh"
	# shellcheck disable=SC2030,SC2031,SC2034 # this subshell's own, read by the library
	PATH=$W/ubin:$PATH RXE_KVFIX_MODULES_DIR=$W/mods RXE_KVFIX_OS_RELEASE=$W/os-debian
	for r in held hook unpacked trig gone broken; do
		rxe_kvfix_kernel "7.2.13+deb14-$r"
		printf '%s: %s deb=%s src=%s\n' "$r" "$KERNEL_FAMILY" "$KERNEL_DEBVER" "$KERNEL_SRCPKG"
	done
)
want='held: debian deb=7.2.13-1 src=linux
hook: debian deb=7.2.13-1 src=linux
unpacked: debian deb=7.2.13-1 src=linux
trig: debian deb=7.2.13-1 src=linux
gone: other deb= src=
broken: other deb= src='
if [[ $out == "$want" ]]; then t_pass; else t_fail "got: $(diff <(echo "$want") <(echo "$out") | tr '\n' '|')"; fi

t_start "prepare on Ubuntu with only the series known (no headers): a tree of that series taken, one of another series refused in one line"
rc=0 rc2=0
mkdir -p "$W/mods-none"
xy=$(awk -F' *= *' '$1 == "VERSION" { v = $2 } $1 == "PATCHLEVEL" { p = $2 } END { print v "." p }' "$TREE/Makefile")
printf '%s\n' "linux-modules-$xy.0-17-generic $xy.0-17.17 linux" "linux-modules-6.1.0-17-generic 6.1.0-17.17 linux" >>"$W/dpkg.tsv"
# shellcheck disable=SC2031 # PATH: this command's own, with the fake dpkg-query first
out=$(PATH=$W/ubin:$PATH RXE_KVFIX_MODULES_DIR=$W/mods-none RXE_KVFIX_OS_RELEASE=$W/os-ubuntu RXE_KVFIX_CONF=/nonexistent \
	"$REPO/kmod/rxe-kvfix-prepare" -q --no-fetch --kernel-tree "$TREE" --out "$W/out-u1" \
	"$xy.0-17-generic" 2>&1) || rc=$?
# shellcheck disable=SC2031 # the same
out2=$(PATH=$W/ubin:$PATH RXE_KVFIX_MODULES_DIR=$W/mods-none RXE_KVFIX_OS_RELEASE=$W/os-ubuntu RXE_KVFIX_CONF=/nonexistent \
	"$REPO/kmod/rxe-kvfix-prepare" -q --no-fetch --kernel-tree "$TREE" --out "$W/out-u2" 6.1.0-17-generic 2>&1) || rc2=$?
if ((rc == 0 && rc2 == 1)) && [[ -f $W/out-u1/rxe_mr.c && $(grep -c . <<<"$out2") == 1 && $out2 == *"not of the 6.1 series"* ]]; then
	t_pass
	echo "     $out2"
else
	t_fail "series match: exit $rc ($out); other series: exit $rc2 ($out2)"
fi

t_start "the rxe part of a diff: git-style and format 1.0 (---/+++ headers alone), a removed '-- ' line kept inside its hunk"
out=$(
	# shellcheck source=kmod/rxe-kvfix-lib.sh
	. "$REPO/kmod/rxe-kvfix-lib.sh"
	printf '%s\n' 'diff --git a/drivers/infiniband/sw/rxe/a.c b/drivers/infiniband/sw/rxe/a.c' \
		'--- a/drivers/infiniband/sw/rxe/a.c' '+++ b/drivers/infiniband/sw/rxe/a.c' '@@ -1,2 +1,2 @@' '--- x' '+y' ' z' \
		'diff --git a/mm/b.c b/mm/b.c' '--- a/mm/b.c' '+++ b/mm/b.c' '@@ -1 +1 @@' '-p' '+q' \
		'--- linux-7.0.orig/drivers/infiniband/sw/rxe/c.c' '+++ linux-7.0/drivers/infiniband/sw/rxe/c.c' '@@ -3 +3 @@' '-r' '+s' \
		'--- linux-7.0.orig/debian/changelog' '+++ linux-7.0/debian/changelog' '@@ -0,0 +1 @@' '+t' |
		rxe_kvfix_rxe_diff | grep -c .
)
if [[ $out == 12 ]]; then t_pass; else t_fail "kept $out lines, want 12"; fi
t_start "the rxe part of a diff: a file it creates under rxe/ (--- /dev/null, git-style and format 1.0) kept, one elsewhere not; --with-makefile keeps the top Makefile only"
out=$(
	# shellcheck source=kmod/rxe-kvfix-lib.sh
	. "$REPO/kmod/rxe-kvfix-lib.sh"
	printf '%s\n' 'diff --git a/drivers/infiniband/sw/rxe/new.c b/drivers/infiniband/sw/rxe/new.c' 'new file mode 100644' \
		'index 0000000..1111111' '--- /dev/null' '+++ b/drivers/infiniband/sw/rxe/new.c' '@@ -0,0 +1 @@' '+n' \
		'--- /dev/null' '+++ linux-7.0/drivers/infiniband/sw/rxe/n2.c' '@@ -0,0 +1 @@' '+m' \
		'--- /dev/null' '+++ linux-7.0/other.c' '@@ -0,0 +1 @@' '+o' >"$W/new.diff"
	printf '%s\n' '--- linux-7.0.orig/Makefile' '+++ linux-7.0/Makefile' '@@ -1 +1 @@' '-SUBLEVEL = 0' '+SUBLEVEL = 14' \
		'--- linux-7.0.orig/tools/Makefile' '+++ linux-7.0/tools/Makefile' '@@ -1 +1 @@' '-a' '+b' >"$W/mk.diff"
	printf '%s|%s|%s\n' "$(rxe_kvfix_rxe_diff <"$W/new.diff" | grep -c .)" "$(rxe_kvfix_rxe_diff <"$W/mk.diff" | grep -c .)" \
		"$(rxe_kvfix_rxe_diff --with-makefile <"$W/mk.diff" | grep -c '^+SUBLEVEL = 14$')"
)
if [[ $out == '11|0|1' ]]; then t_pass; else t_fail "kept lines (created files | Makefile without the option | SUBLEVEL with it): $out, want 11|0|1"; fi

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
