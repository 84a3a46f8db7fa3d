#!/usr/bin/env bash
# in-root-fetch.sh: kmod/rxe-kvfix-fetch's source-archive path, run inside an
# overlay of the sid build root (chroot), against the real archive the root's apt
# uses and, for what that archive cannot show, a small local file:// source
# repository made here (labelled "local repository" in each test's name) and a
# simulated archive with its snapshot archive on 127.0.0.1 (tests/kmod/mksnapshot-sim.sh,
# made on the host by tests/kmod/run; "simulated archive").
#
#   in-root-fetch.sh SRC
#
# Cost: about 90 s (one 160 MB upstream tarball from the archive, eight private
# index updates of ~35 MB each; the translated-locale case 9 s of it: 3 s to make
# the locale, 6 s its fetch; the broken third-party sources 20 s: 12 s the fetch
# beside them, 8 s the needed source unreadable; the Ubuntu HWE source package, format
# 1.0, about 10 s; the held and half-configured kernels, case 10, about 10 s; the archive
# of record, a simulated archive and snapshot archive on 127.0.0.1, about 13 s).
set -euo pipefail

usage() { echo "Usage: in-root-fetch.sh SRC"; }
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
t_suite kmod-fetch
FETCH=$SRC/kmod/rxe-kvfix-fetch
PREP=$SRC/kmod/rxe-kvfix-prepare
HOOK=$SRC/kmod/rxe-kvfix-kernel-hook
RXE=drivers/infiniband/sw/rxe
CACHE=/var/cache/rxe-kvfix/sources
rm -rf "$CACHE"
mkdir -p "$CACHE"

re() {
	local s=${1//./[.]}
	printf '%s\n' "${s//+/[+]}"
} # a kernel release as an ERE matching it

# run_case NAME WANT_RC PATTERN CMD...: CMD exits WANT_RC (fail = any non-zero)
# and prints a line matching PATTERN, which is shown
run_case() {
	local name=$1 want=$2 pattern=$3 rc=0 out line
	shift 3
	t_start "$name"
	out=$("$@" 2>&1) || rc=$?
	line=$(grep -E "$pattern" <<<"$out" | head -n1 || true)
	if [[ $want == fail ]] && ((rc == 0)); then
		t_fail "exit 0, expected an error: $(tail -n1 <<<"$out")"
	elif [[ $want != fail ]] && ((rc != want)); then
		t_fail "exit $rc, expected $want: $(tail -n1 <<<"$out")"
	elif [[ -z $line ]]; then
		t_fail "no line matching '$pattern': $(tail -n1 <<<"$out")"
	else
		t_pass
		printf '     %s\n' "$(sed -E 's#[a-z]+://[^ ]*/##g' <<<"$line" | cut -c1-240)"
	fi
	return 0
}

# --- the real archive ------------------------------------------------------
# trixie-backports from the root's own apt sources (the same mirror), as the host
# of a trixie-backports kernel has it; its binary lists are never fetched
src_file=/etc/apt/sources.list.d/rxe-kvfix.sources
uri=$(sed -n 's/^URIs:[[:space:]]*//p' "$src_file" | head -n1)
printf 'Types: deb\nURIs: %s\nSuites: trixie-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
	"$uri" >/etc/apt/sources.list.d/rxe-test-bpo.sources

# 1. Debian's 7.1.13 (the series of the kernels the project is for): the archive
# serves no linux-source-7.1, so the source package from the source archive; the
# mirror serves its upstream tarball, not Debian's part (404), and the provenance
# says so. Classified from it by prepare, as a DKMS build would.
K1=7.1.13+deb13-amd64 V1=7.1.13-1~bpo13+1
t_fake_headers_deb "$K1" "$V1"
run_case "source archive: $K1 ($V1) fetched and classified (no linux-source-7.1 package)" 0 \
	"^$(re "$K1") affected-kzalloc_objs fetch\$" "$PREP" --classify --out /tmp/out1 "$K1"
kept=$CACHE/linux-7.1.13.tar.xz
t_start "source archive: the cache keeps the Makefile and rxe directory, with its provenance"
if [[ -f $kept ]] && grep -qx "kernel=$K1" "$kept.provenance" && grep -q '^verified=apt (SHA-256' "$kept.provenance" &&
	grep -q "^debian=" "$kept.provenance" && (($(stat -c %s "$kept") < 500000)) &&
	[[ $(tar -tf "$kept" | grep -v '/$' | grep -vcE "/Makefile\$|/$RXE/") == 0 ]]; then
	t_pass
	echo "     $(stat -c %s "$kept") bytes kept; $(grep -E '^(bytes|debian)=' "$kept.provenance" | tr '\n' ' ')"
else
	t_fail "$(ls -la "$CACHE") $(cat "$kept.provenance" 2>&1)"
fi
dpkg -P "linux-headers-$K1" >/dev/null
t_start "source archive: the kernel's removal forgets what was kept for it"
"$HOOK" postrm "$K1"
if [[ ! -e $kept && ! -e $kept.provenance ]]; then t_pass; else t_fail "left: $(ls "$CACHE")"; fi

# 2. a version the archive no longer serves: listed in the index, its files 404
K2=7.0.13+deb14-amd64 V2=7.0.13-1
t_fake_headers_deb "$K2" "$V2"
run_case "source archive: a version whose files the archive no longer serves (404): one line" fail \
	"error: no source of kernel $(re "$K2") here and the download failed: apt-get source linux=$V2 failed \\(linux_7\\.0\\.13\\.orig\\.tar\\.xz: 404 Not Found\\); put the kernel's source tarball in $CACHE/ as linux-7\\.0\\.13\\.tar\\.xz" \
	"$PREP" --out /tmp/out2 "$K2"
t_check "source archive: 404: nothing left in $CACHE" test -z "$(ls -A "$CACHE")"
dpkg -P "linux-headers-$K2" >/dev/null
rm -f /etc/apt/sources.list.d/rxe-test-bpo.sources

# --- a local file:// source repository ------------------------------------
# What the mirror never serves (Debian's part of a linux source package), and a
# file that does not match the index. Its upstream tarball holds the top Makefile
# and rxe directory of the root's linux-source tarball, relabelled 9.8.N.
R=/srv/rxe-test-srcrepo
rm -rf "$R" /tmp/repo-x
mkdir -p "$R" /tmp/repo-x
TB=$(find /usr/src -maxdepth 1 -name 'linux-source-*.tar.xz' | sort -V | tail -n1)
tar -xf "$TB" -C /tmp/repo-x --wildcards --no-wildcards-match-slash "*/$RXE/*" "*/Makefile"
mv /tmp/repo-x/* /tmp/repo-x/linux-9.8.1
sed -i -E 's/^VERSION = .*/VERSION = 9/; s/^PATCHLEVEL = .*/PATCHLEVEL = 8/; s/^SUBLEVEL = .*/SUBLEVEL = 1/' /tmp/repo-x/linux-9.8.1/Makefile
(cd /tmp/repo-x && tar -cJf "$R/linux_9.8.1.orig.tar.xz" linux-9.8.1)
# Debian's part: two patches, one touching rxe.c (git style), one elsewhere
mkdir -p /tmp/repo-x/debian/patches
cat >/tmp/repo-x/debian/patches/rxe-note.patch <<'EOF'
diff --git a/drivers/infiniband/sw/rxe/rxe.c b/drivers/infiniband/sw/rxe/rxe.c
--- a/drivers/infiniband/sw/rxe/rxe.c
+++ b/drivers/infiniband/sw/rxe/rxe.c
@@ -0,0 +1 @@
+/* rxe-kvfix test: a line from debian/patches */
EOF
cat >/tmp/repo-x/debian/patches/elsewhere.patch <<'EOF'
diff --git a/README.rxe-kvfix-test b/README.rxe-kvfix-test
new file mode 100644
--- /dev/null
+++ b/README.rxe-kvfix-test
@@ -0,0 +1 @@
+a file outside the rxe directory
EOF
printf 'elsewhere.patch\nrxe-note.patch\n' >/tmp/repo-x/debian/patches/series
(cd /tmp/repo-x && tar -cJf "$R/linux_9.8.1-1.debian.tar.xz" debian)
printf 'Format: 3.0 (quilt)\nSource: linux\nVersion: 9.8.1-1\n' >"$R/linux_9.8.1-1.dsc"
cp "$R/linux_9.8.1.orig.tar.xz" "$R/linux_9.8.2.orig.tar.xz"
printf 'Format: 3.0 (quilt)\nSource: linux\nVersion: 9.8.2-1\n' >"$R/linux_9.8.2-1.dsc"
stanza() { # VERSION FILE... (a file given as NAME=SHA256 gets that hash instead of its own)
	local v=$1 f n h
	shift
	printf 'Package: linux\nBinary: linux-source-9.8\nVersion: %s\nMaintainer: rxe-kvfix tests <root@localhost>\nArchitecture: all\nFormat: 3.0 (quilt)\nDirectory: .\nFiles:\n' "$v"
	for f; do
		n=${f%%=*}
		printf ' %s %s %s\n' "$(md5sum <"$R/$n" | cut -d' ' -f1)" "$(stat -c %s "$R/$n")" "$n"
	done
	printf 'Checksums-Sha256:\n'
	for f; do
		n=${f%%=*} h=${f#*=}
		[[ $f == *=* ]] || h=$(sha256sum <"$R/$n" | cut -d' ' -f1)
		printf ' %s %s %s\n' "$h" "$(stat -c %s "$R/$n")" "$n"
	done
	printf '\n'
}
{
	stanza 9.8.1-1 linux_9.8.1-1.dsc linux_9.8.1.orig.tar.xz linux_9.8.1-1.debian.tar.xz
	stanza 9.8.2-1 linux_9.8.2-1.dsc "linux_9.8.2.orig.tar.xz=$(printf '0%.0s' {1..64})"
} >"$R/Sources"
printf 'Types: deb\nURIs: file:%s\nSuites: ./\nTrusted: yes\n' "$R" >/etc/apt/sources.list.d/rxe-test-local.sources

# 3. Debian's patches: the one touching rxe applied to the kept source, the other not
K3=9.8.1-rxetest
t_fake_headers_deb "$K3" 9.8.1-1
run_case "local repository: Debian's patches of the source package: the rxe one applied" 0 \
	"^$K3 affected-kzalloc_objs fetch\$" "$PREP" --classify --out /tmp/out3 "$K3"
kept=$CACHE/linux-source-9.8_9.8.1-1.tar.xz
t_start "local repository: the kept rxe source carries Debian's rxe patch, provenance counts it"
rxe_c=$(tar -xOf "$kept" --wildcards "*/$RXE/rxe.c" 2>/dev/null || true)
if grep -q 'a line from debian/patches' <<<"$rxe_c" &&
	grep -qx 'debian=linux_9.8.1-1.debian.tar.xz: 1 of the 2 patches of debian/patches/series touch drivers/infiniband/sw/rxe, applied' "$kept.provenance"; then
	t_pass
else
	t_fail "$(cat "$kept.provenance" 2>&1)"
fi
t_check "local repository: the provenance says the configured archive served it (archive=repository)" \
	grep -qx 'archive=repository' "$kept.provenance"
# --tree: the whole tree, every patch of the series applied
rm -rf /tmp/tree3
run_case "local repository: --tree unpacks the whole source with Debian's series applied" 0 \
	"^tree=/tmp/tree3 origin=linux .* tree_bytes=" "$FETCH" --tree /tmp/tree3 "$K3" 9.8.1-1
t_check "local repository: --tree: both patches in the tree" \
	grep -q 'outside the rxe directory' /tmp/tree3/README.rxe-kvfix-test
dpkg -P "linux-headers-$K3" >/dev/null
"$HOOK" postrm "$K3"

# 4. a file that does not match the signed index: apt refuses it, nothing kept
K4=9.8.2-rxetest
t_fake_headers_deb "$K4" 9.8.2-1
run_case "local repository: a file whose hash does not match the index: refused, one line" fail \
	"error: no source of kernel $K4 here and the download failed: apt-get source linux=9\\.8\\.2-1 failed \\(linux_9\\.8\\.2\\.orig\\.tar\\.xz: Hash Sum mismatch.*\\); put the kernel's source tarball in $CACHE/" \
	"$PREP" --out /tmp/out4 "$K4"
t_check "local repository: hash mismatch: nothing left in $CACHE" test -z "$(ls -A "$CACHE")"
dpkg -P "linux-headers-$K4" >/dev/null

# 5. a host whose locale is German: apt answers in German (its own translations,
# /usr/share/locale/de/LC_MESSAGES/apt.mo, are in the root), and the fetch still
# tells "not served as linux-source-9.8" from a failure and takes the source
# package. The root has no locale but C.UTF-8: de_DE.UTF-8 is made here, inside
# this overlay only, from locale sources (the root's, or the host's that
# tests/kmod/run copies to /root/i18n).
de_env=(env -u LC_ALL LANG=de_DE.UTF-8 LANGUAGE=de)
i18n=/usr/share/i18n
[[ -f $i18n/locales/de_DE ]] || i18n=/root/i18n
t_start "translated locale: de_DE.UTF-8 made in this overlay, apt answers in German"
if [[ ! -f /usr/share/locale/de/LC_MESSAGES/apt.mo ]]; then
	t_fail "the root has no apt.mo for de: the case below could not fail"
elif [[ ! -f $i18n/locales/de_DE ]]; then
	t_fail "no locale sources (neither the root's /usr/share/i18n nor the host's): install locales on the host"
elif ! err=$(I18NPATH=$i18n localedef -i de_DE -f UTF-8 de_DE.UTF-8 2>&1); then
	t_fail "localedef de_DE.UTF-8: $(tail -n1 <<<"$err")"
elif de=$("${de_env[@]}" apt-get download rxe-kvfix-no-such-package 2>&1) || [[ $de == *'Unable to locate'* || $de != E:* ]]; then
	t_fail "apt still answers in English under LANG=de_DE.UTF-8: $de"
else
	t_pass
	echo "     apt: $de"
fi
K5=9.8.1-rxetest-de
t_fake_headers_deb "$K5" 9.8.1-1
run_case "local repository, translated locale (LANG=de_DE.UTF-8 LANGUAGE=de): not served as linux-source-9.8, fetched as the source package" 0 \
	"^$K5 affected-kzalloc_objs fetch\$" "${de_env[@]}" "$PREP" --classify --out /tmp/out5 "$K5"
dpkg -P "linux-headers-$K5" >/dev/null
"$HOOK" postrm "$K5"

# 10. a kernel that is installed but not in state ii: held with apt-mark hold (hi),
# and one whose own postinst runs the kernel hook (dpkg marks it half-configured,
# iF, before it runs the postinst, as a kernel's postinst running DKMS is). Both are
# Debian's kernels with their version: the source package is fetched for them.
K10=9.8.1-rxetest-held
t_fake_headers_deb "$K10" 9.8.1-1
apt-mark hold "linux-headers-$K10" >/dev/null
t_check "held kernel: linux-headers-$K10 is hi after apt-mark hold" \
	test "$(dpkg-query -W -f '${db:Status-Abbrev}' "linux-headers-$K10")" = "hi "
run_case "local repository, held kernel (apt-mark hold, dpkg state hi): fetched as the source package" 0 \
	"^$K10 affected-kzalloc_objs fetch\$" "$PREP" --classify --out /tmp/out10 "$K10"
apt-mark unhold "linux-headers-$K10" >/dev/null
dpkg -P "linux-headers-$K10" >/dev/null
"$HOOK" postrm "$K10"
K10c=9.8.1-rxetest-cfg
d10=$(mktemp -d)
mkdir -p "$d10/pkg/DEBIAN"
printf 'Package: linux-headers-%s\nVersion: 9.8.1-1\nArchitecture: all\nMaintainer: rxe-kvfix tests <root@localhost>\nDescription: rxe-kvfix test: a kernel whose postinst runs the hook\n' \
	"$K10c" >"$d10/pkg/DEBIAN/control"
cat >"$d10/pkg/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
[ "$1" = configure ] || exit 0
dpkg-query -W -f '${db:Status-Abbrev}\n' linux-headers-@K@ >/tmp/state10c
@PREP@ --classify --out /tmp/out10c @K@ >/tmp/classify10c 2>&1 || echo "exit $?" >>/tmp/classify10c
exit 0
POSTINST
sed -i "s|@K@|$K10c|g; s|@PREP@|$PREP|g" "$d10/pkg/DEBIAN/postinst"
chmod 755 "$d10/pkg/DEBIAN/postinst"
dpkg-deb -b "$d10/pkg" "$d10/h.deb" >/dev/null
rm -f /tmp/state10c /tmp/classify10c
dpkg -i "$d10/h.deb" >/dev/null
rm -rf "$d10"
t_start "local repository, kernel configured inside its own postinst (dpkg state iF): fetched as the source package"
if [[ $(cat /tmp/state10c 2>/dev/null) != 'iF ' ]]; then
	t_fail "the postinst saw state '$(cat /tmp/state10c 2>/dev/null)', not iF: the case could not fail"
elif ! grep -qx "$K10c affected-kzalloc_objs fetch" /tmp/classify10c; then
	t_fail "$(tail -n2 /tmp/classify10c | tr '\n' ' ')"
else
	t_pass
fi
dpkg -P "linux-headers-$K10c" >/dev/null
"$HOOK" postrm "$K10c"

# 6. a broken third-party apt source beside the local repository: a flat one without
# a Release file (an empty directory) and one where nothing listens (127.0.0.1, a
# port checked closed): the private index update fails for them, the fetch succeeds
port=9
while (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
mkdir -p /srv/rxe-test-empty
printf 'Types: deb\nURIs: file:/srv/rxe-test-empty\nSuites: ./\n\nTypes: deb\nURIs: http://127.0.0.1:%s/debian\nSuites: sid\nComponents: main\n' \
	"$port" >/etc/apt/sources.list.d/rxe-test-broken.sources
K6=9.8.1-rxetest-b
t_fake_headers_deb "$K6" 9.8.1-1
run_case "local repository beside broken third-party sources (no Release file; 127.0.0.1:$port closed): fetched" 0 \
	"^$K6 affected-kzalloc_objs fetch\$" "$PREP" --classify --out /tmp/out6 "$K6"
t_check "broken third-party sources: the kept source's provenance is the local repository's" \
	grep -qx 'debian=linux_9.8.1-1.debian.tar.xz: 1 of the 2 patches of debian/patches/series touch drivers/infiniband/sw/rxe, applied' \
	"$CACHE/linux-source-9.8_9.8.1-1.tar.xz.provenance"
"$HOOK" postrm "$K6"
# 7. and when the source that indexes the kernel is the one that fails (its Sources
# gone), the one line names that failure first, then the third parties'
mv "$R/Sources" "$R/Sources.away"
run_case "broken third-party sources and the needed one unreadable: one line naming the needed one's failure first" fail \
	"error: cannot read the source archive's index: no source apt read indexes the source package linux 9\\.8\\.1-1, and it could not read file:$R \\./ Sources: File not found; file:/srv/rxe-test-empty \\./ Release: File not found; .*127\\.0\\.0\\.1:$port.*; put the kernel's source tarball" \
	"$FETCH" --archive never "$K6" 9.8.1-1
mv "$R/Sources.away" "$R/Sources"
dpkg -P "linux-headers-$K6" >/dev/null
t_check "needed source unreadable: nothing left in $CACHE" test -z "$(ls -A "$CACHE")"
rm -f /etc/apt/sources.list.d/rxe-test-local.sources /etc/apt/sources.list.d/rxe-test-broken.sources

# 9. an Ubuntu HWE kernel (simulated here: os-release says Ubuntu for this case, a
# local repository serves the source package): its source package is not linux and
# builds no linux-source-X.Y.Z; format 1.0, one X.Y.0 orig (SUBLEVEL = 0) shared by the
# uploads, and a .diff.gz that carries the stable update (SUBLEVEL 0 -> 1) and an rxe
# change. The kernel's headers say 9.9.1: the kept source must say so too, from the diff.
K9=9.9.0-3-generic V9=9.9.0-3.3 S9=linux-hwe-9.9
rm -rf /tmp/repo-u && mkdir -p /tmp/repo-u
tar -xf "$TB" -C /tmp/repo-u --wildcards --no-wildcards-match-slash "*/$RXE/*" "*/Makefile"
mv /tmp/repo-u/* "/tmp/repo-u/$S9-9.9.0.orig"
sed -i -E 's/^VERSION = .*/VERSION = 9/; s/^PATCHLEVEL = .*/PATCHLEVEL = 9/; s/^SUBLEVEL = .*/SUBLEVEL = 0/' "/tmp/repo-u/$S9-9.9.0.orig/Makefile"
cp -a "/tmp/repo-u/$S9-9.9.0.orig" "/tmp/repo-u/$S9-9.9.0"
sed -i -E 's/^SUBLEVEL = .*/SUBLEVEL = 1/' "/tmp/repo-u/$S9-9.9.0/Makefile"
echo '/* rxe-kvfix test: a line from the HWE diff */' >>"/tmp/repo-u/$S9-9.9.0/$RXE/rxe.c"
(cd /tmp/repo-u && tar -czf "$R/${S9}_9.9.0.orig.tar.gz" --transform "s#^$S9-9.9.0.orig#$S9-9.9.0#" "$S9-9.9.0.orig")
(cd /tmp/repo-u && { diff -Nru "$S9-9.9.0.orig" "$S9-9.9.0" || (($? == 1)); } | gzip -9n >"$R/${S9}_$V9.diff.gz")
printf 'Format: 1.0\nSource: %s\nVersion: %s\n' "$S9" "$V9" >"$R/${S9}_$V9.dsc"
{
	printf 'Package: %s\nBinary: linux-headers-%s\nVersion: %s\nMaintainer: rxe-kvfix tests <root@localhost>\nArchitecture: any\nFormat: 1.0\nDirectory: .\nFiles:\n' "$S9" "$K9" "$V9"
	for n in "${S9}_$V9.dsc" "${S9}_9.9.0.orig.tar.gz" "${S9}_$V9.diff.gz"; do
		printf ' %s %s %s\n' "$(md5sum <"$R/$n" | cut -d' ' -f1)" "$(stat -c %s "$R/$n")" "$n"
	done
	printf 'Checksums-Sha256:\n'
	for n in "${S9}_$V9.dsc" "${S9}_9.9.0.orig.tar.gz" "${S9}_$V9.diff.gz"; do
		printf ' %s %s %s\n' "$(sha256sum <"$R/$n" | cut -d' ' -f1)" "$(stat -c %s "$R/$n")" "$n"
	done
	printf '\n'
} >>"$R/Sources"
printf 'Types: deb\nURIs: file:%s\nSuites: ./\nTrusted: yes\n' "$R" >/etc/apt/sources.list.d/rxe-test-local.sources
# the kernel's headers: a package of source linux-hwe-9.9 whose Makefile says 9.9.1
d9=$(mktemp -d)
mkdir -p "$d9/pkg/DEBIAN" "$d9/pkg/usr/src/linux-headers-$K9" "$d9/pkg/lib/modules/$K9"
sed -E 's/^SUBLEVEL = .*/SUBLEVEL = 1/' "/tmp/repo-u/$S9-9.9.0.orig/Makefile" >"$d9/pkg/usr/src/linux-headers-$K9/Makefile"
ln -s "/usr/src/linux-headers-$K9" "$d9/pkg/lib/modules/$K9/build"
printf 'Package: linux-headers-%s\nSource: %s (%s)\nVersion: %s\nArchitecture: all\nMaintainer: rxe-kvfix tests <root@localhost>\nDescription: rxe-kvfix test: an HWE kernel without its source here\n' \
	"$K9" "$S9" "$V9" "$V9" >"$d9/pkg/DEBIAN/control"
dpkg-deb -b "$d9/pkg" "$d9/h.deb" >/dev/null && dpkg -i "$d9/h.deb" >/dev/null
rm -rf "$d9" /tmp/repo-u
printf 'ID=ubuntu\nID_LIKE=debian\nVERSION_ID="26.04"\n' >/tmp/os-release-ubuntu
run_case "local repository, Ubuntu HWE (simulated): source package $S9 1.0, X.Y.0 orig + diff moving SUBLEVEL: the kernel's 9.9.1 fetched" 0 \
	"^$K9 affected-kzalloc_objs fetch\$" env RXE_KVFIX_OS_RELEASE=/tmp/os-release-ubuntu "$PREP" --classify --out /tmp/out9 "$K9"
kept9=$(find "$CACHE" -maxdepth 1 -name "*_$V9.tar.xz" | head -n1)
t_start "Ubuntu HWE (simulated): the kept source says 9.9.1 and carries the diff's rxe change; provenance says so"
if [[ -z $kept9 ]]; then
	t_fail "nothing kept in $CACHE: $(find "$CACHE" -mindepth 1 -printf '%f ')"
elif [[ $(tar -xOf "$kept9" --wildcards '*/Makefile' --no-wildcards-match-slash 2>/dev/null | sed -n 's/^SUBLEVEL = //p' | head -n1) != 1 ]] ||
	! tar -xOf "$kept9" --wildcards "*/$RXE/rxe.c" 2>/dev/null | grep -q 'a line from the HWE diff' ||
	! grep -q "the top Makefile's version from it: 9.9.1" "$kept9.provenance"; then
	t_fail "$(tr '\n' ' ' <"$kept9.provenance")"
else
	t_pass
	echo "     $(grep '^debian=' "$kept9.provenance")"
fi
dpkg -P "linux-headers-$K9" >/dev/null
env RXE_KVFIX_OS_RELEASE=/tmp/os-release-ubuntu "$HOOK" postrm "$K9"
rm -f /etc/apt/sources.list.d/rxe-test-local.sources /tmp/os-release-ubuntu

# 10. the archive of record (SIMULATED: a signed archive and its snapshot archive,
# tests/kmod/mksnapshot-sim.sh, served on 127.0.0.1 by python3's http.server in the
# real URL layout). The configured suite indexes only the newest upload, 9.7.2-1; the
# running kernel is 9.7.1-1, superseded: its source is only in the snapshot archive,
# whose address is the Snapshots field of the configured archive's Release, found by
# the mr interface and read by apt against that snapshot's signed index. The root's
# own (real) source is set aside meanwhile: nothing here reaches a real archive.
SIM=/srv/rxe-test-snapshot
if [[ ! -f $SIM/port ]]; then
	t_start "simulated snapshot archive: made by tests/kmod/run"
	t_fail "no $SIM (tests/kmod/mksnapshot-sim.sh failed on the host): the archive-of-record cases cannot run"
else
	sport=$(cat "$SIM/port")
	mv "$src_file" /root/rxe-kvfix.sources.away
	python3 -m http.server --bind 127.0.0.1 --directory "$SIM" "$sport" 2>/tmp/snap-http.log &
	HTTP_PID=$!
	trap 'kill "$HTTP_PID" 2>/dev/null || true' EXIT
	for _ in $(seq 50); do
		if (echo >"/dev/tcp/127.0.0.1/$sport") 2>/dev/null; then break; fi
		sleep 0.1
	done
	printf 'Types: deb\nURIs: http://127.0.0.1:%s/current\nSuites: rxetest\nComponents: main\nSigned-By: %s/key.gpg\n' \
		"$sport" "$SIM" >/etc/apt/sources.list.d/rxe-test-sim.sources
	mr_asked() { grep -c 'GET /mr/' /tmp/snap-http.log || true; }
	K10=9.7.1-rxetest-snap V10=9.7.1-1
	t_fake_headers_deb "$K10" "$V10"
	run_case "simulated archive: a superseded kernel ($V10; the suite indexes 9.7.2-1 only) fetched from the snapshot archive (its Release's Snapshots field, the mr interface, the snapshot's signed index)" 0 \
		"^$K10 affected-kzalloc_objs fetch\$" "$PREP" --classify --out /tmp/out10 "$K10"
	kept=$CACHE/linux-source-9.7_$V10.tar.xz
	t_start "simulated archive: the kept source is the snapshot's 9.7.1-1 with its debian/patches; provenance archive=snapshot"
	if [[ -f $kept ]] && grep -qx 'archive=snapshot' "$kept.provenance" &&
		grep -q '^verified=apt (SHA-256 .*the snapshot 20260101T000000Z' "$kept.provenance" &&
		tar -xOf "$kept" --wildcards "*/$RXE/rxe.c" 2>/dev/null | grep -q "9.7.1-1's debian/patches" &&
		[[ $(tar -xOf "$kept" --wildcards '*/Makefile' --no-wildcards-match-slash 2>/dev/null | sed -n 's/^SUBLEVEL = //p' | head -n1) == 1 ]]; then
		t_pass
		echo "     $(grep -E '^(archive|verified)=' "$kept.provenance" | tr '\n' ' ')"
	else
		t_fail "$(tr '\n' ' ' <"$kept.provenance" 2>&1)"
	fi
	"$HOOK" postrm "$K10"
	# archive=never: the configured archive only; the snapshot archive is not asked
	printf 'archive=never\n' >/tmp/rxe-kvfix-never.conf
	n0=$(mr_asked)
	run_case "simulated archive, archive=never: the superseded kernel is not fetched from the snapshot archive; one line" fail \
		"error: no source of kernel $(re "$K10") here and the download failed: the archive this host's apt knows serves neither linux-source-9\\.7=$V10 nor the source package linux $V10; put the kernel's source tarball" \
		env RXE_KVFIX_CONF=/tmp/rxe-kvfix-never.conf "$PREP" --out /tmp/out10n "$K10"
	t_check "simulated archive, archive=never: the mr interface was not asked (it was for this kernel under archive=auto)" \
		test "$(mr_asked)" == "$n0" -a "$n0" -ge 1
	dpkg -P "linux-headers-$K10" >/dev/null
	# a snapshot whose InRelease another key signed: apt refuses it, nothing kept
	K12=9.7.3-rxetest-snap V12=9.7.3-1
	t_fake_headers_deb "$K12" "$V12"
	run_case "simulated archive: a snapshot whose InRelease is not signed by the key apt trusts for the source: refused, one line" fail \
		"error: no source of kernel $(re "$K12") here and the download failed: .*the snapshot archive: rxetest: the snapshot 20260201T000000Z does not index it in this host's suites \\(.*InRelease: .*(Missing key|NO_PUBKEY|signature)" \
		"$PREP" --out /tmp/out12 "$K12"
	t_check "simulated archive, wrong signature: that snapshot's InRelease was read, nothing kept for $V12" \
		test -z "$(find "$CACHE" -maxdepth 1 -name "*$V12*")" -a -n "$(grep -F 'GET /archive/rxetest/20260201T000000Z/dists/rxetest/InRelease' /tmp/snap-http.log)"
	dpkg -P "linux-headers-$K12" >/dev/null
	# a version the snapshot archive does not hold either (the mr interface: 404): the
	# one line says so, with a remedy that can succeed; the next try within a day does
	# not ask the snapshot archive again (no download storm at each boot)
	K11=9.7.0-rxetest-snap V11=9.7.0-1
	t_fake_headers_deb "$K11" "$V11"
	run_case "simulated archive: a version not even the snapshot archive holds (mr: 404): one line, a remedy that can succeed" fail \
		"error: no source of kernel $(re "$K11") here and the download failed: .*the snapshot archive: rxetest: no linux $V11 in the snapshot archive \\(404\\); put the kernel's source tarball in $CACHE/ as linux-9\\.7\\.0\\.tar\\.xz" \
		"$PREP" --out /tmp/out11 "$K11"
	n0=$(mr_asked)
	run_case "simulated archive: the next try within the back-off does not ask the snapshot archive again; the line says until when" fail \
		"the snapshot archive did not hold it on .*not asked again before [0-9T:-]+Z unless $CACHE/\\.archive-miss/linux_$V11 is deleted" \
		"$PREP" --out /tmp/out11b "$K11"
	t_check "simulated archive, back-off: the mr interface asked on the first try, not on the second" \
		test "$(mr_asked)" == "$n0" -a "$(grep -c 'GET /mr/package/linux/9.7.0-1/' /tmp/snap-http.log)" == 1
	dpkg -P "linux-headers-$K11" >/dev/null
	rm -rf "$CACHE/.archive-miss"
	# Ubuntu's snapshot layout, no mr interface (Ubuntu's snapshot service has none):
	# the snapshot of the moment dpkg installed the kernel's headers here, when the
	# configured suite indexed that version. The simulated server resolves no
	# timestamp, so that moment is set to the snapshot's own (touch -d).
	printf 'Types: deb\nURIs: http://127.0.0.1:%s/current-u\nSuites: rxeu\nComponents: main\nSigned-By: %s/key.gpg\n' \
		"$sport" "$SIM" >/etc/apt/sources.list.d/rxe-test-sim.sources
	K13=9.7.5-rxetest-u V13=9.7.5-1
	t_fake_headers_deb "$K13" "$V13"
	touch -d '2026-03-01 00:00:00 UTC' "/var/lib/dpkg/info/linux-headers-$K13.list"
	n0=$(mr_asked)
	run_case "simulated archive, Ubuntu's snapshot layout (no mr interface): a superseded kernel ($V13; the suite indexes 9.7.6-1 only) fetched from the snapshot of its installation" 0 \
		"^$K13 affected-kzalloc_objs fetch\$" "$PREP" --classify --out /tmp/out13 "$K13"
	kept=$CACHE/linux-source-9.7_$V13.tar.xz
	t_start "simulated archive, Ubuntu's layout: provenance archive=snapshot, the snapshot 20260301T000000Z, no mr request"
	if [[ -f $kept ]] && grep -qx 'archive=snapshot' "$kept.provenance" &&
		grep -q '^verified=apt (SHA-256 .*the snapshot 20260301T000000Z' "$kept.provenance" &&
		[[ $(mr_asked) == "$n0" ]] && grep -qF 'GET /ubuntu/20260301T000000Z/dists/rxeu/InRelease' /tmp/snap-http.log; then
		t_pass
	else
		t_fail "mr requests $n0 -> $(mr_asked); $(tr '\n' ' ' <"$kept.provenance" 2>&1)"
	fi
	"$HOOK" postrm "$K13"
	dpkg -P "linux-headers-$K13" >/dev/null
	kill "$HTTP_PID" 2>/dev/null || true
	wait "$HTTP_PID" 2>/dev/null || true
	trap - EXIT
	rm -f /etc/apt/sources.list.d/rxe-test-sim.sources
	mv /root/rxe-kvfix.sources.away "$src_file"
fi

# 8. usage: exit 2 and one line
run_case "fetch: no arguments" 2 'needs KERNELRELEASE and VERSION' "$FETCH"
run_case "fetch: a version that is not one" 2 "is not a Debian package version" "$FETCH" 7.1.13+deb13-amd64 'x y'
run_case "fetch: --tree on a non-empty directory" 2 "exists and is not an empty directory" "$FETCH" --tree "$SRC" 7.1.13+deb13-amd64 7.1.13-1
exit $((T_FAILS > 0))
