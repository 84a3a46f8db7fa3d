#!/usr/bin/env bash
# fedora-full-srpm.sh: a kernel source RPM with Fedora's full tarball layout
# (simulated: Debian's tree under Fedora's names), made once and kept. Source0 is
# the whole upstream tree linux-UPSTREAM.tar.xz (Debian's linux-source tarball
# SOURCE re-rooted from linux-source-X.Y/ to linux-UPSTREAM/, every file of it,
# recompressed with xz -0 -T2: the cheapest .tar.xz), Patch1 patch-X.Y-redhat.patch in
# git format that changes rxe_verbs.c (a marker comment), adds a file under rxe/
# (drivers/infiniband/sw/rxe/rxe_fedora_full.h, --- /dev/null) and changes the top
# Makefile (EXTRAVERSION), as Fedora's patch touches rxe and the rest. The source
# RPM's payload is stored uncompressed (the tarball is already xz).
#
#   fedora-full-srpm.sh SOURCE UPSTREAM
#
# SOURCE: a Debian linux-source-X.Y tarball (.tar.xz) of UPSTREAM (X.Y.Z, checked
# against its top Makefile). Prints the path of kernel-UPSTREAM-200.fc44.src.rpm in
# $RXE_CACHE/fedora-full-srpm/KEY/ (default /var/cache/rxe-kvfix), KEY from SOURCE's
# name, size and time, UPSTREAM and this script's code (its comments left out). Made
# under /var/tmp (the 1.4 GB tree never lands on disk: it is streamed; the tarball and
# the source RPM, 230 MiB each, do). Cost when not kept (measured, 7.2.13): 394 s on
# a machine loaded by others (load 10 to 14), 95 s of CPU; 230 MiB kept; 0.3 s when kept.
set -euo pipefail

usage() { sed -n '/^#   fedora-full-srpm.sh SOURCE/,/^# a machine loaded/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
	usage
	exit 0
fi
if (($# != 2)) || [[ ! -f $1 || $1 != *.tar.xz || ! $2 =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "fedora-full-srpm.sh: give a Debian linux-source .tar.xz that exists and its upstream version X.Y.Z (see --help)" >&2
	exit 2
fi
SRC=$1 UP=$2
XY=${UP%.*}
RXE=drivers/infiniband/sw/rxe
CACHE=${RXE_CACHE:-/var/cache/rxe-kvfix}/fedora-full-srpm
KEY=$({
	printf '%s %s %s\n' "$(basename "$SRC")" "$(stat -c '%s %Y' "$SRC")" "$UP"
	grep -v '^[[:space:]]*#' "${BASH_SOURCE[0]}"
} | sha256sum | cut -c1-16)
OUT=$CACHE/$KEY/kernel-$UP-200.fc44.src.rpm
if [[ -f $OUT ]]; then
	echo "$OUT"
	exit 0
fi

W=$(mktemp -d /var/tmp/rxe-kvfix-full-srpm.XXXXXX)
# shellcheck disable=SC2317 # called by the trap
cleanup() { rm -rf "$W" "$CACHE/$KEY.part.$$"; }
trap cleanup EXIT
mkdir -p "$W/rpm/SOURCES" "$W/rpm/SPECS" "$W/a"
t0=$SECONDS
# one pass: the tree re-rooted into the new tarball; the top Makefile and the rxe
# directory also written to $W/a for the patch
xz -dc "$SRC" | python3 -c '
import io, os, sys, tarfile
up, keep, rxe = sys.argv[1], sys.argv[2], sys.argv[3]
src = tarfile.open(fileobj=sys.stdin.buffer, mode="r|")
dst = tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT)
top = None
for m in src:
    head, _, rest = m.name.partition("/")
    top = top or head
    if head != top:
        sys.exit("more than one top directory: " + head)
    m.name = "linux-" + up + ("/" + rest if rest else "")
    if m.issym() or m.islnk():
        if m.islnk():
            h, _, r = m.linkname.partition("/")
            m.linkname = "linux-" + up + "/" + r
        dst.addfile(m)
        continue
    f = src.extractfile(m) if m.isfile() else None
    if f is not None and (rest == "Makefile" or rest.startswith(rxe + "/")):
        data = f.read()
        p = os.path.join(keep, rest)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as o:
            o.write(data)
        f = io.BytesIO(data)
    dst.addfile(m, f)
dst.close()
' "$UP" "$W/a" "$RXE" | xz -T2 -0 >"$W/rpm/SOURCES/linux-$UP.tar.xz"
t1=$SECONDS
mk() { sed -n "s/^$1 *= *//p" "$W/a/Makefile" | head -n1; }
got="$(mk VERSION).$(mk PATCHLEVEL).$(mk SUBLEVEL)"
if [[ $got != "$UP" || ! -f $W/a/$RXE/rxe_verbs.c ]]; then
	echo "fedora-full-srpm.sh: $SRC holds linux $got (rxe_verbs.c: $([[ -f $W/a/$RXE/rxe_verbs.c ]] && echo yes || echo no)), not $UP with rxe: give the linux-source of $UP" >&2
	exit 1
fi
# patch-X.Y-redhat.patch, git format: a change inside rxe, a file added under rxe, one
# outside (left out by the SRPM provider)
cp -a "$W/a" "$W/b"
sed -i '1a /* fedora-full-srpm: applied by rxe-kvfix-prepare */' "$W/b/$RXE/rxe_verbs.c"
printf '/* SPDX-License-Identifier: GPL-2.0 */\n/* fedora-full-srpm: added by the redhat patch (simulated) */\n#define RXE_FEDORA_FULL 1\n' >"$W/b/$RXE/rxe_fedora_full.h"
sed -i -E 's/^EXTRAVERSION =.*/EXTRAVERSION = -fedorafull/' "$W/b/Makefile"
{
	for f in "$RXE/rxe_verbs.c" "$RXE/rxe_fedora_full.h" Makefile; do
		printf 'diff --git a/%s b/%s\n' "$f" "$f"
		if [[ -f $W/a/$f ]]; then
			diff -u --label "a/$f" --label "b/$f" "$W/a/$f" "$W/b/$f" || true
		else
			printf 'new file mode 100644\n'
			diff -u --label /dev/null --label "b/$f" /dev/null "$W/b/$f" || true
		fi
	done
} >"$W/rpm/SOURCES/patch-$XY-redhat.patch"
cat >"$W/rpm/SPECS/kernel.spec" <<SPEC
Name: kernel
Version: $UP
Release: 200.fc44
Summary: rxe-kvfix test: Fedora's source RPM layout, the full tree (simulated)
License: GPL-2.0-only
Source0: linux-$UP.tar.xz
Patch1: patch-$XY-redhat.patch
%description
Made by rxe-kvfix's tests from Debian's linux-source of linux $UP, the whole tree
re-rooted as linux-$UP/ (simulated: not Fedora's tarball).
SPEC
rpmbuild -bs --define "_topdir $W/rpm" --define '_source_payload w.ufdio' "$W/rpm/SPECS/kernel.spec" >"$W/rpmbuild.log" 2>&1 || {
	echo "fedora-full-srpm.sh: rpmbuild -bs failed: $(tail -n1 "$W/rpmbuild.log")" >&2
	exit 1
}
mkdir -p "$CACHE/$KEY.part.$$"
mv "$W"/rpm/SRPMS/kernel-"$UP"-200.fc44*.src.rpm "$CACHE/$KEY.part.$$/kernel-$UP-200.fc44.src.rpm"
rm -rf "${CACHE:?}/$KEY"
mv "$CACHE/$KEY.part.$$" "$CACHE/$KEY"
echo "fedora-full-srpm.sh: made in $((SECONDS - t0)) s (tarball $((t1 - t0)) s, $(($(stat -c %s "$W/rpm/SOURCES/linux-$UP.tar.xz") / 1048576)) MiB)" >&2
echo "$OUT"
