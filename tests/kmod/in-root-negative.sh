#!/usr/bin/env bash
# in-root-negative.sh: bad sources, run inside the sid build root (chroot).
# Each case must end in a one-line error naming cause and remedy and a
# non-zero exit (or a clean DKMS skip where that is right), with no module of
# ours installed and the stock module still the one modprobe resolves.
#
#   in-root-negative.sh SRC
#
# A kernel tree at /root/linux-tree (tests/kmod/run binds there the primary
# kernel's source with our series committed by git am) is the already-fixed
# source of case 4; without one, case 4 patches a copy of the tarball's rxe.
set -euo pipefail

usage() { echo "Usage: in-root-negative.sh SRC"; }
[[ ${1:-} != -h && ${1:-} != --help ]] || {
	usage
	exit 0
}
(($# == 1)) || {
	usage >&2
	exit 2
}
SRC=$1
# shellcheck source=tests/testlib.sh
. "$SRC/tests/testlib.sh"
t_suite kmod-negative
M=rxe-kvfix
# shellcheck source=kmod/rxe-kvfix-lib.sh
. "$SRC/kmod/rxe-kvfix-lib.sh"
VER=$(rxe_kvfix_meta_version "$SRC")
PREP=$SRC/kmod/rxe-kvfix-prepare
RXE=drivers/infiniband/sw/rxe

# the newest kernel whose linux-source is installed, and an older cached one
K=$(awk '!/^#/ && $3 == "sid" {print $1}' "$SRC/vmhost/kernels.tsv" | sort -V | tail -n1)
XY=$(cut -d. -f1,2 <<<"$K")
TARBALL=/usr/src/linux-source-$XY.tar.xz
CACHE=/var/cache/rxe-kvfix/sources
KDEB=$(dpkg-query -W -f '${Version}' "linux-source-$XY")
OTHER=$(find "$CACHE" -name "linux-source-${XY}_*.tar.xz" ! -name "linux-source-${XY}_${KDEB}.tar.xz" | head -n1)
[[ -f $TARBALL ]] || {
	t_fail "setup" "$TARBALL missing in the root"
	exit 1
}
STOCK=$(find "/lib/modules/$K/kernel" -name 'rdma_rxe.ko*' | head -n1)
mklog=/var/lib/dkms/$M/$VER/build/make.log

make -C "$SRC" dkms-src >/dev/null
dkms add "$M/$VER" >/dev/null

nothing_installed() {
	! find "/lib/modules/$K/updates" "/lib/modules/$K/extra" -name 'rdma_rxe.ko*' 2>/dev/null | grep -q . &&
		[[ $(modinfo -k "$K" -n rdma_rxe) == "$STOCK" ]] &&
		! dkms status "$M/$VER" -k "$K" 2>/dev/null | grep -q installed
}

# expect NAME WANT_RC PATTERN CMD...: CMD exits WANT_RC ("fail" = any non-zero
# but 77; "notbuilt" = DKMS's skip, 77, with the failure recorded: the status file
# says state=failed and its message matches PATTERN), DKMS's make.log or CMD's
# output holds PATTERN on one line, and nothing is installed.
status=/var/lib/rxe-kvfix/status/$K
expect() {
	local name=$1 want=$2 pattern=$3 rc=0 out line
	shift 3
	t_start "$name"
	rm -f "$mklog" "$status"
	out=$("$@" 2>&1) || rc=$?
	line=$({
		printf '%s\n' "$out"
		cat "$mklog" 2>/dev/null || true
	} | grep -E "$pattern" | head -n1 || true)
	if [[ $want == notbuilt ]]; then
		if ((rc != 77)); then
			t_fail "exit $rc, expected DKMS's skip (77): a failure must never fail a kernel's installation"
			return 0
		elif ! grep -qx 'state=failed' "$status" 2>/dev/null || ! grep '^message=' "$status" | grep -qE "$pattern"; then
			t_fail "$status does not record the failure with a line matching '$pattern': $(tr '\n' ' ' <"$status" 2>/dev/null)"
			return 0
		fi
		want=77
	fi
	if [[ $want == fail ]] && ((rc == 0 || rc == 77)); then
		t_fail "exit $rc, expected an error"
	elif [[ $want != fail ]] && ((rc != want)); then
		t_fail "exit $rc, expected $want: $(tail -n1 <<<"$out")"
	elif [[ -z $line ]]; then
		t_fail "no line matching '$pattern' in the output or $mklog"
	elif ! nothing_installed; then
		t_fail "a module is installed or modinfo -n no longer gives the stock module"
	else
		t_pass
		printf '     %s\n' "$(printf '%s\n' "${line#"${line%%[![:space:]]*}"}" | cut -c1-220)"
	fi
}

# make_tree DIR: a minimal kernel tree (top Makefile + rxe) from the tarball
make_tree() {
	rm -rf "$1"
	mkdir -p "$1"
	tar -xf "$TARBALL" -C "$1" --strip-components=1 --wildcards --no-wildcards-match-slash "*/$RXE/*" "*/Makefile"
}

hide() { mv "$1" "$1.hidden"; }
unhide() { mv "$1.hidden" "$1"; }

# 1. no source at all, downloads off (fetch=never): the line names the exact file to
# fetch elsewhere and where to put it
printf 'fetch=never\n' >/tmp/fetch-never.conf
hide "$TARBALL"
[[ ! -d $CACHE ]] || hide "$CACHE"
expect "no source, fetch=never: dkms build steps aside (77), the file to fetch and where to put it recorded" notbuilt \
	"no source of kernel .* here, and fetch=never .*apt-get download linux-source-$XY=$KDEB and put that .deb in $CACHE/" \
	env RXE_KVFIX_CONF=/tmp/fetch-never.conf dkms build "$M/$VER" -k "$K"

# F. the fetch (fetch=auto, the default), with no local source, each bad case one
# recorded line, nothing left in the cache, the stock module resolved
mkdir -p "$CACHE"
# F1. the archive unreachable: apt's proxy pointed at a closed local port
printf 'Acquire::http::Proxy "http://127.0.0.1:9/";\nAcquire::https::Proxy "http://127.0.0.1:9/";\nAcquire::Retries "0";\n' >/tmp/unreachable.conf
expect "fetch: archive unreachable: steps aside (77), the line says what to fetch elsewhere" notbuilt \
	"the download failed: apt-get download linux-source-$XY=$KDEB failed .*; on a host that reaches the archive run apt-get download linux-source-$XY=$KDEB, put that .deb in $CACHE/" \
	env APT_CONFIG=/tmp/unreachable.conf dkms build "$M/$VER" -k "$K"
t_check "fetch: archive unreachable: nothing left in $CACHE" test -z "$(ls -A "$CACHE")"
# F2. a full cache disk: a 16 KiB tmpfs where the kept source goes
mount -t tmpfs -o size=16k rxe-kvfix-full "$CACHE"
expect "fetch: cache disk full: steps aside (77), the line says so" notbuilt \
	"cannot write $CACHE/linux-source-${XY}_$KDEB.tar.xz .*is the disk full\\?\\); free space where $CACHE is" \
	dkms build "$M/$VER" -k "$K"
t_check "fetch: cache disk full: no partial file left" test -z "$(ls -A "$CACHE")"
umount "$CACHE"
# F3. a truncated .deb where the offline remedy puts one: refused and removed; then
# the whole .deb there is what an offline host does: built from it
(cd /tmp && apt-get download -q "linux-source-$XY=$KDEB" >/dev/null 2>&1) || true
DEB=$(find /tmp -maxdepth 1 -name "linux-source-${XY}_*.deb" -print -quit)
if [[ -n $DEB ]]; then
	head -c "$(($(stat -c %s "$DEB") / 2))" "$DEB" >"$CACHE/${DEB##*/}"
	expect "fetch: a truncated .deb in the cache: refused (77), recorded, removed" notbuilt \
		"is not a whole .deb \\(corrupt or truncated\\); removed it; download it again" \
		env RXE_KVFIX_CONF=/tmp/fetch-never.conf dkms build "$M/$VER" -k "$K"
	t_check "fetch: the truncated .deb was removed" test ! -e "$CACHE/${DEB##*/}"
	mv "$DEB" "$CACHE/"
	t_start "fetch: the whole .deb in the cache (the offline remedy), fetch=never: built from it"
	rm -f "$status"
	brc=0
	env RXE_KVFIX_CONF=/tmp/fetch-never.conf dkms build "$M/$VER" -k "$K" >/tmp/offline.log 2>&1 || brc=$?
	if ((brc == 0)) && grep -qx 'state=built' "$status" && [[ -s $CACHE/linux-source-${XY}_$KDEB.tar.xz && ! -e $CACHE/${DEB##*/} ]]; then
		t_pass
		echo "     $(sed -n 's/^message=//p' "$status"); kept $(stat -c %s "$CACHE/linux-source-${XY}_$KDEB.tar.xz") bytes"
	else
		t_fail "exit $brc: $(tail -n 2 /tmp/offline.log | tr '\n' ' ') $(tr '\n' ' ' <"$status" 2>&1)"
	fi
	dkms remove "$M/$VER" -k "$K" >/dev/null 2>&1 || true
	rm -f "$CACHE"/*
else
	t_skip "fetch: a truncated .deb in the cache" "apt-get download linux-source-$XY=$KDEB failed in this root (no archive reachable)"
fi
# F4. a version the archive does not serve: a kernel "9.9.9-rxetest" whose headers
# package (made here) says 9.9.9-1; prepare itself, no DKMS. With archive=never: the
# archive of record has its own cases against a simulated snapshot archive on
# 127.0.0.1 (in-root-fetch.sh); this one must not ask a real snapshot service.
t_fake_headers_deb 9.9.9-rxetest 9.9.9-1
printf 'archive=never\n' >/tmp/rxe-kvfix-archive-never.conf
expect "fetch: a version the archive does not serve: refused with the line" fail \
	"the archive this host's apt knows serves neither linux-source-9.9=9.9.9-1 nor the source package linux 9.9.9-1; put the kernel's source tarball in $CACHE/ as linux-9.9.9.tar.xz" \
	env RXE_KVFIX_CONF=/tmp/rxe-kvfix-archive-never.conf "$PREP" --out /tmp/out9 9.9.9-rxetest
rm -f /tmp/rxe-kvfix-archive-never.conf
dpkg -P linux-headers-9.9.9-rxetest >/dev/null
rmdir "$CACHE" 2>/dev/null || true
unhide "$TARBALL"
[[ ! -d $CACHE.hidden ]] || unhide "$CACHE"

# 2. the installed linux-source holds another version than its package says
if [[ -n $OTHER ]]; then
	cp -a "$TARBALL" "$TARBALL.orig"
	cp "$OTHER" "$TARBALL"
	expect "source version differs from the kernel: refused, recorded" notbuilt 'holds linux .*, not .*pass --force' \
		dkms build "$M/$VER" -k "$K"
	mv "$TARBALL.orig" "$TARBALL"
else
	t_skip "source version differs from the kernel" "the sid root has no second linux-source-$XY tarball in $CACHE"
fi

# 3. corrupt (truncated) tarball
cp -a "$TARBALL" "$TARBALL.orig"
head -c "$(($(stat -c %s "$TARBALL.orig") / 2))" "$TARBALL.orig" >"$TARBALL"
expect "truncated tarball: refused, recorded" notbuilt 'cannot read .*\(corrupt or truncated' \
	dkms build "$M/$VER" -k "$K"
mv "$TARBALL.orig" "$TARBALL"

# 4. already-fixed source (our patches applied first): a clean DKMS skip
if [[ -f /root/linux-tree/Makefile && $(rxe_kvfix_tree_version /root/linux-tree) == "${K%%+*}" ]]; then
	FIXED=/root/linux-tree what="the fix committed with git am"
else
	FIXED=/tmp/fixed what="our patches applied"
	make_tree "$FIXED"
	for p in "$SRC"/patches/mainline/*.patch; do patch -d "$FIXED" -p1 -s <"$p"; done
fi
expect "already-fixed source ($what): dkms build skips (77)" 77 'already allocates the rxe MR page array with a kv\* allocator' \
	env RXE_KVFIX_KERNEL_TREE="$FIXED" dkms build "$M/$VER" -k "$K"
expect "already-fixed source ($what): dkms autoinstall succeeds and skips" 0 'skipped for module\(s\) rxe-kvfix' \
	env RXE_KVFIX_KERNEL_TREE="$FIXED" dkms autoinstall -k "$K"

# 5. affected source that our patch no longer applies to
make_tree /tmp/altered
sed -i 's/kzalloc_objs(struct rxe_mr_page, num_pages)/kzalloc_objs(struct rxe_mr_page, num_pages, GFP_KERNEL)/' \
	/tmp/altered/$RXE/rxe_mr.c
expect "patch no longer applies: refused, recorded" notbuilt 'patch 0001-.* does not apply to the rxe source' \
	env RXE_KVFIX_KERNEL_TREE=/tmp/altered dkms build "$M/$VER" -k "$K"

# 6. rxe source of a shape we cannot classify
make_tree /tmp/unknown
sed -i 's/mr->page_info = kzalloc_objs(struct rxe_mr_page, num_pages);/mr->page_info = rxe_alloc_pages(num_pages);/' \
	/tmp/unknown/$RXE/rxe_mr.c
expect "unknown rxe source: refused, recorded" notbuilt 'cannot tell how kernel .* allocates MR page metadata' \
	env RXE_KVFIX_KERNEL_TREE=/tmp/unknown dkms build "$M/$VER" -k "$K"

# 6b. a source that classifies, patches and then does not compile: the failure is
# kbuild's, and still DKMS's skip with the line recorded; the kernel hook prints that
# line for apt's output and exits 0
make_tree /tmp/nocompile
echo '#error rxe-kvfix test: a compile error made at test time' >>/tmp/nocompile/$RXE/rxe.c
expect "compile error: DKMS steps aside (77), kbuild's error recorded" notbuilt 'kbuild of rdma_rxe failed .*rxe-kvfix test: a compile error' \
	env RXE_KVFIX_KERNEL_TREE=/tmp/nocompile dkms build "$M/$VER" -k "$K"
t_start "kernel hook: prints the recorded line, exits 0"
hrc=0
hout=$("$SRC/kmod/rxe-kvfix-kernel-hook" postinst "$K" "/boot/vmlinuz-$K" 2>&1) || hrc=$?
if ((hrc == 0)) && grep -q "^rxe-kvfix: kernel $K: NOT BUILT, .*kbuild of rdma_rxe failed" <<<"$hout"; then
	t_pass
	printf '     %s\n' "$(cut -c1-220 <<<"$hout")"
else
	t_fail "exit $hrc, printed: $hout"
fi
t_start "kernel hook: a removed kernel's record is forgotten, exit 0"
hrc=0
"$SRC/kmod/rxe-kvfix-kernel-hook" postrm "$K" || hrc=$?
if ((hrc == 0)) && [[ ! -e $status && ! -e $status.log ]]; then t_pass; else t_fail "exit $hrc; left: $(ls "$status"* 2>&1)"; fi

# 7. explicit kernel tree of another version, then accepted with --force
make_tree /tmp/wrongver
sed -i -E 's/^SUBLEVEL = .*/SUBLEVEL = 999/' /tmp/wrongver/Makefile
expect "kernel tree of another version: refused" fail "error: kernel tree /tmp/wrongver is version $XY.999, not .*add --force" \
	"$PREP" --kernel-tree /tmp/wrongver --out /tmp/out "$K"
expect "kernel tree of another version: accepted with --force" 0 'prepared /tmp/out' \
	"$PREP" --force --kernel-tree /tmp/wrongver --out /tmp/out "$K"

# 8. usage errors: exit 2 and one line
expect "prepare: no kernel release" 2 'missing KERNELRELEASE' "$PREP"
expect "prepare: garbage kernel release" 2 'is not a kernel release' "$PREP" 'foo bar'
expect "prepare: unknown option" 2 "unknown option '--bogus'" "$PREP" --bogus "$K"
expect "prepare: kernel tree that does not exist" fail "kernel tree '/nonexistent' does not exist" \
	"$PREP" --kernel-tree /nonexistent "$K"
expect "prepare: source RPM that does not exist" fail "source RPM '/nonexistent.src.rpm' does not exist" \
	env RXE_KVFIX_CACHE_DIR=/nonexistent "$PREP" --srpm /nonexistent.src.rpm 9.9.9-1.fc99.x86_64
expect "make install before make: refused" fail "no module built for" make -C "$SRC" install KVER="$K" BUILD_DIR=/tmp/nobuild
expect "make validate-patch without KTREE: refused" 2 'needs KTREE=' make -s -C "$SRC" validate-patch
expect "make for a kernel without headers: refused" fail 'no kernel build tree at' make -C "$SRC" KVER=9.9.9-none

dkms remove "$M/$VER" --all >/dev/null 2>&1 || true

# 9. without DKMS: make, make install, make uninstall (positive case)
t_start "make + make install without DKMS: modprobe resolves to updates/rxe-kvfix"
if make -s -C "$SRC" KVER="$K" BUILD_DIR=/tmp/nodkms >/tmp/nodkms.log 2>&1 &&
	make -s -C "$SRC" install KVER="$K" BUILD_DIR=/tmp/nodkms >>/tmp/nodkms.log 2>&1 &&
	[[ $(modinfo -k "$K" -n rdma_rxe) == "/lib/modules/$K/updates/rxe-kvfix/rdma_rxe.ko" ]] &&
	[[ $(modinfo -k "$K" -F version rdma_rxe) == "$VER-rxe-kvfix" ]]; then
	t_pass
else
	t_fail "$(tail -n2 /tmp/nodkms.log | tr '\n' ' ') modinfo -n: $(modinfo -k "$K" -n rdma_rxe 2>&1)"
fi
t_start "make uninstall: the stock module is resolved again"
if make -s -C "$SRC" uninstall KVER="$K" >>/tmp/nodkms.log 2>&1 && [[ $(modinfo -k "$K" -n rdma_rxe) == "$STOCK" ]]; then
	t_pass
else
	t_fail "modinfo -n: $(modinfo -k "$K" -n rdma_rxe 2>&1)"
fi
exit $((T_FAILS > 0))
