#!/usr/bin/env bash
# mksnapshot-sim.sh: a SIMULATED Debian archive and its snapshot archive, in the URL
# layout of the real ones, for the archive-of-record cases of tests/kmod/in-root-fetch.sh
# (served there on 127.0.0.1 by python3's http.server). Made on the host by
# tests/kmod/run, which has gpg (the build roots have none) to sign it with a key made
# here for this run; nothing in it is Debian's.
#
#   mksnapshot-sim.sh OUT PORT LINUX_SOURCE
#
# LINUX_SOURCE: a kernel tree (the validate stage's cached one) or a linux-source
# tarball. OUT gets (the source package "linux", relabelled 9.7.N, its upstream part
# the top Makefile and rxe directory of LINUX_SOURCE):
#   key.gpg                                      the public key (apt's Signed-By)
#   current/dists/rxetest/{Release,InRelease}    the configured archive: its suite
#   current/dists/rxetest/main/source/Sources*   indexes only the newest upload,
#   current/pool/main/l/linux/...                9.7.2-1; its Release's Snapshots field
#                                                names the snapshot archive below
#   archive/rxetest/20260101T000000Z/dists/...   the snapshot of that day: its suite
#   archive/rxetest/20260101T000000Z/pool/...    indexes 9.7.1-1 (Release past
#                                                Valid-Until, as a snapshot's is)
#   mr/package/linux/9.7.1-1/srcfiles            the machine-readable interface's answer
#                                                (fileinfo: name, archive_name,
#                                                first_seen, path, size)
#   archive/rxetest/20260201T000000Z/...       a snapshot indexing 9.7.3-1, its
#                                                InRelease signed by another key
#   current-u/, ubuntu/20260301T000000Z/        the same in Ubuntu's layout, suite rxeu,
#                                                no mr interface: 9.7.6-1 now, 9.7.5-1
#                                                in the snapshot
# 9.7.0-1 is in neither (the mr interface answers 404).
# Cost: about 1 s from a tree (a key, two signatures); from a tarball about 25 s more
# (its 160 MB unpacked to find the rxe directory).
set -euo pipefail
RXE=drivers/infiniband/sw/rxe

usage() { echo "Usage: mksnapshot-sim.sh OUT PORT LINUX_SOURCE (a tree or a linux-source tarball)"; }
[[ ${1:-} != -h && ${1:-} != --help ]] || {
	usage
	exit 0
}
if (($# != 3)) || [[ ! $2 =~ ^[0-9]+$ ]] || [[ ! -f $3 && ! -f $3/$RXE/rxe_mr.c ]]; then
	usage >&2
	exit 2
fi
OUT=$1 PORT=$2 TB=$3
ID=20260101T000000Z
TMP=$(mktemp -d)
cleanup() { rm -rf "$TMP"; }
trap cleanup EXIT
for t in gpg tar xz sha256sum md5sum; do
	command -v "$t" >/dev/null || {
		echo "mksnapshot-sim.sh: $t is not installed on the host" >&2
		exit 1
	}
done
rm -rf "$OUT"
mkdir -p "$OUT"

# the key, for this run only
export GNUPGHOME=$TMP/gnupg
mkdir -m 0700 "$GNUPGHOME"
gpg -q --batch --pinentry-mode loopback --passphrase '' \
	--quick-gen-key 'rxe-kvfix test archive (simulated) <root@localhost>' ed25519 sign never 2>/dev/null
gpg -q --batch --pinentry-mode loopback --passphrase '' \
	--quick-gen-key 'not the archive (simulated) <nobody@localhost>' ed25519 sign never 2>/dev/null
gpg -q --batch --export 'rxe-kvfix test archive' >"$OUT/key.gpg"

# the upstream part: the top Makefile and the rxe directory, relabelled 9.7.N
if [[ -d $TB ]]; then
	up=$TMP/linux-source
	mkdir -p "$up/$RXE"
	cp -a "$TB/Makefile" "$up/"
	cp -a "$TB/$RXE/." "$up/$RXE/"
else
	tar -xf "$TB" -C "$TMP" --wildcards --no-wildcards-match-slash "*/$RXE/*" "*/Makefile"
	up=$(find "$TMP" -mindepth 1 -maxdepth 1 -type d -name 'linux-source-*')
fi
[[ -n $up ]] || {
	echo "mksnapshot-sim.sh: $TB holds no linux-source-* directory" >&2
	exit 1
}

# src_package POOL N: linux_9.7.N.orig.tar.xz, linux_9.7.N-1.debian.tar.xz (one patch
# touching rxe.c, with a line naming the version) and the .dsc, in POOL
src_package() {
	local pool=$1 n=$2 d=$TMP/pkg-$2
	rm -rf "$d" && mkdir -p "$d/linux-9.7.$n" "$d/debian/patches" "$pool"
	cp -a "$up/." "$d/linux-9.7.$n/"
	sed -i -E "s/^VERSION = .*/VERSION = 9/; s/^PATCHLEVEL = .*/PATCHLEVEL = 7/; s/^SUBLEVEL = .*/SUBLEVEL = $n/" "$d/linux-9.7.$n/Makefile"
	(cd "$d" && tar -cJf "$pool/linux_9.7.$n.orig.tar.xz" "linux-9.7.$n")
	cat >"$d/debian/patches/rxe-note.patch" <<EOF
diff --git a/$RXE/rxe.c b/$RXE/rxe.c
--- a/$RXE/rxe.c
+++ b/$RXE/rxe.c
@@ -0,0 +1 @@
+/* rxe-kvfix test: 9.7.$n-1's debian/patches (simulated archive) */
EOF
	echo rxe-note.patch >"$d/debian/patches/series"
	(cd "$d" && tar -cJf "$pool/linux_9.7.$n-1.debian.tar.xz" debian)
	printf 'Format: 3.0 (quilt)\nSource: linux\nVersion: 9.7.%s-1\n' "$n" >"$pool/linux_9.7.$n-1.dsc"
}
# sources_stanza POOL N: the Sources stanza of 9.7.N-1, its files' sums from POOL
sources_stanza() {
	local pool=$1 n=$2 f files=()
	files=("linux_9.7.$n-1.dsc" "linux_9.7.$n.orig.tar.xz" "linux_9.7.$n-1.debian.tar.xz")
	printf 'Package: linux\nBinary: linux-doc-9.7\nVersion: 9.7.%s-1\nMaintainer: rxe-kvfix tests <root@localhost>\nArchitecture: all\nFormat: 3.0 (quilt)\nDirectory: pool/main/l/linux\nFiles:\n' "$n"
	for f in "${files[@]}"; do printf ' %s %s %s\n' "$(md5sum <"$pool/$f" | cut -d' ' -f1)" "$(stat -c %s "$pool/$f")" "$f"; done
	printf 'Checksums-Sha256:\n'
	for f in "${files[@]}"; do printf ' %s %s %s\n' "$(sha256sum <"$pool/$f" | cut -d' ' -f1)" "$(stat -c %s "$pool/$f")" "$f"; done
	printf '\n'
}
# release BASE DATE VALID_UNTIL [SNAPSHOTS]: BASE/dists/$DIST/{Release,InRelease},
# signed with the archive's key (SIGNER: another one)
SIGNER='rxe-kvfix test archive'
release() {
	local dist=$1/dists/$DIST f
	{
		printf 'Origin: rxe-kvfix-test\nLabel: rxe-kvfix-test (simulated)\nSuite: %s\nCodename: %s\n' "$DIST" "$DIST"
		printf 'Date: %s\nValid-Until: %s\nArchitectures: amd64\nComponents: main\n' "$2" "$3"
		[[ -z ${4:-} ]] || printf 'Snapshots: %s\n' "$4"
		printf 'SHA256:\n'
		for f in main/source/Sources main/source/Sources.gz; do
			printf ' %s %s %s\n' "$(sha256sum <"$dist/$f" | cut -d' ' -f1)" "$(stat -c %s "$dist/$f")" "$f"
		done
	} >"$dist/Release"
	gpg -q --batch --yes --pinentry-mode loopback --passphrase '' -u "$SIGNER" --clearsign -o "$dist/InRelease" "$dist/Release"
}
# suite BASE N: BASE's suite indexing 9.7.N-1 only, its files in BASE/pool
suite() {
	local pool=$1/pool/main/l/linux src=$1/dists/$DIST/main/source
	mkdir -p "$src"
	src_package "$pool" "$2"
	sources_stanza "$pool" "$2" >"$src/Sources"
	gzip -9nk "$src/Sources"
}

fmt='+%a, %d %b %Y %H:%M:%S UTC'
now=$(date +%s)
DIST=rxetest
suite "$OUT/current" 2
release "$OUT/current" "$(date -u -d "@$((now - 86400))" "$fmt")" "$(date -u -d "@$((now + 7 * 86400))" "$fmt")" \
	"http://127.0.0.1:$PORT/archive/rxetest/@SNAPSHOTID@/"
snap=$OUT/archive/rxetest/$ID
suite "$snap" 1
release "$snap" "$(date -u -d 2026-01-01 "$fmt")" "$(date -u -d 2026-01-08 "$fmt")"

# 9.7.3-1 in a snapshot whose InRelease another key signed (not the one apt trusts
# for the configured source)
ROGUE=20260201T000000Z
SIGNER='not the archive'
suite "$OUT/archive/rxetest/$ROGUE" 3
release "$OUT/archive/rxetest/$ROGUE" "$(date -u -d 2026-02-01 "$fmt")" "$(date -u -d 2026-02-08 "$fmt")"

# mr N SNAPSHOT: the mr interface's answer for 9.7.N-1: its three files (keyed by
# SHA-1, as the service keys them), each first seen in SNAPSHOT of the archive rxetest
mr() {
	local n=$1 id=$2 pool=$OUT/archive/rxetest/$2/pool/main/l/linux sep='' f files
	files=("linux_9.7.$n-1.dsc" "linux_9.7.$n.orig.tar.xz" "linux_9.7.$n-1.debian.tar.xz")
	mkdir -p "$OUT/mr/package/linux/9.7.$n-1"
	{
		printf '{"_comment": "rxe-kvfix test (simulated)", "package": "linux", "version": "9.7.%s-1", "result": [' "$n"
		for f in "${files[@]}"; do
			printf '%s{"hash": "%s"}' "$sep" "$(sha1sum <"$pool/$f" | cut -d' ' -f1)"
			sep=', '
		done
		printf '], "fileinfo": {'
		sep=''
		for f in "${files[@]}"; do
			printf '%s"%s": [{"archive_name": "rxetest", "first_seen": "%s", "name": "%s", "path": "/pool/main/l/linux", "size": %s}]' \
				"$sep" "$(sha1sum <"$pool/$f" | cut -d' ' -f1)" "$id" "$f" "$(stat -c %s "$pool/$f")"
			sep=', '
		done
		printf '}}\n'
	} >"$OUT/mr/package/linux/9.7.$n-1/srcfiles"
}
mr 1 "$ID"
mr 3 "$ROGUE"

# Ubuntu's layout (its snapshot service has no mr interface): the configured suite
# rxeu indexes 9.7.6-1 only, its Release's Snapshots field names BASE/ubuntu/ID/, whose
# snapshot 20260301T000000Z indexes 9.7.5-1
SIGNER='rxe-kvfix test archive' DIST=rxeu
suite "$OUT/current-u" 6
release "$OUT/current-u" "$(date -u -d "@$((now - 86400))" "$fmt")" "$(date -u -d "@$((now + 7 * 86400))" "$fmt")" \
	"http://127.0.0.1:$PORT/ubuntu/@SNAPSHOTID@/"
suite "$OUT/ubuntu/20260301T000000Z" 5
release "$OUT/ubuntu/20260301T000000Z" "$(date -u -d 2026-03-01 "$fmt")" "$(date -u -d 2026-03-08 "$fmt")"
echo "$PORT" >"$OUT/port"
